"""What a box printed: one stream in arrival order, each chunk with its source (stdout or stderr), as
`docker logs` keeps it, under ROSTER_RUN_MAX_OUTPUT_BYTES in all. Stored as the run's `output` and
`output_sources` (controlplane.fleet.output reads them), so a stderr line written last is never stored at
byte 0, and a traceback never lands inside a stdout line unmarked.

"Arrival order" is the order Docker's daemon read the box's two pipes: writes to stdout and stderr in the
same instant can arrive in either order (two pipes have no common clock); writes apart in time, flushed,
arrive in write order."""

from __future__ import annotations

import codecs
import contextlib
import struct
import threading
from collections.abc import Iterable, Iterator

import docker
import requests

from controlplane.fleet.output import SOURCES, STDERR, STDOUT

Frame = tuple[bytes | None, bytes | None]  # docker-py's demuxed frame: (stdout bytes, stderr bytes)


def demuxed_log(container, follow: bool) -> Iterator[Frame]:
    """Docker's log of the box, each frame with its stream. docker-py's logs() drops the stream and its
    attach() keeps it (demux=True) but never ends on a stopped box; so the /logs call read frame by frame
    (Docker's multiplexed format: an 8-byte header, stream 1 stdout or 2 stderr, and the length)."""
    api = container.client.api
    response = api._get(api._url("/containers/{0}/logs", container.id),
                        params={"stdout": 1, "stderr": 1, "follow": int(follow)}, stream=True)
    api._raise_for_status(response)
    try:
        while True:
            header = response.raw.read(8)
            if len(header) < 8:
                return
            stream, length = struct.unpack(">BxxxL", header)
            data = response.raw.read(length) if length else b""
            if stream == 1:
                yield data, None
            elif stream == 2:
                yield None, data
    finally:
        response.close()


def _frame_parts(frame: Frame) -> Iterator[tuple[str, bytes]]:
    out, err = frame
    if out:
        yield STDOUT, out
    if err:
        yield STDERR, err


class OutputCollector(threading.Thread):
    """Keeps the first max_bytes of the box's stdout and stderr in arrival order with their sources, and
    whether anything was dropped.

    The dispatcher attaches (`attach_before_start`) before the box starts, so every byte passes through
    here whatever the box's speed or exit timing: Docker's on-disk log is capped (see box_create_kwargs) and
    rotates by truncation, so a flood read back from it after the fact can have lost its start or its
    middle. Reading that log (`follow`) is left for recovery, when the watcher was lost; what comes from
    it cannot be proven whole and is flagged truncated."""

    def __init__(self, container, max_bytes: int, follow: bool = True, open_log=demuxed_log):
        super().__init__(daemon=True)
        self.container, self.max_bytes, self.follow, self.open_log = container, max_bytes, follow, open_log
        self.chunks: list[tuple[str, bytes]] = []  # (source, bytes), adjacent chunks of one source merged
        self.size = 0
        self.truncated = False
        self.complete = False  # the stream ended (or the limit was reached) rather than being cut off
        self.attached = False
        self._stream = None

    def attach_before_start(self) -> None:
        self._stream = self.container.attach(stdout=True, stderr=True, stream=True, logs=False, demux=True)
        self.attached = True

    def _keep(self, source: str, data: bytes) -> None:
        if self.chunks and self.chunks[-1][0] == source:
            self.chunks[-1] = (source, self.chunks[-1][1] + data)
        else:
            self.chunks.append((source, data))
        self.size += len(data)

    def run(self) -> None:
        with contextlib.suppress(docker.errors.DockerException, requests.RequestException, OSError):
            if self._stream is None:
                self._stream = self.open_log(self.container, self.follow)
            for frame in self._stream:
                for source, data in _frame_parts(frame):
                    room = self.max_bytes - self.size
                    if len(data) > room:
                        if room:
                            self._keep(source, data[:room])
                        self.truncated = True
                        break
                    self._keep(source, data)
                if self.truncated:
                    break
            self.complete = True
        if not self.attached:
            # Read back from Docker's capped log, which may have dropped bytes without a trace.
            self.truncated = True
        self.stop()

    def stop(self) -> None:
        if self._stream is not None:
            with contextlib.suppress(Exception):
                self._stream.close()

    def finish(self, timeout: float) -> None:
        """Wait for the rest of the output; what is still unread then is dropped, and said to be."""
        self.join(timeout=timeout)
        if self.is_alive() or not self.complete:
            self.truncated = True
        self.stop()

    def take_tail_from_log(self) -> None:
        """After the box exited: Docker can close an attached stream before it has passed on the last bytes
        a box wrote as it exited; its log, read now, has them. The log is taken only where it extends what
        was read exactly (same bytes, same sources, from byte 0): then its start was not rotated away, so it
        is the box's whole output, and whatever was read can only grow, never change."""
        if not self.attached or self.size >= self.max_bytes:
            return
        try:
            logged: list[tuple[str, bytes]] = []
            for frame in self.open_log(self.container, False):
                for source, data in _frame_parts(frame):
                    if logged and logged[-1][0] == source:
                        logged[-1] = (source, logged[-1][1] + data)
                    else:
                        logged.append((source, data))
        except (docker.errors.DockerException, requests.RequestException, OSError):
            return
        if not _extends(logged, self.chunks):
            return
        self.chunks, self.size, self.truncated = [], 0, False
        for source, data in logged:
            room = self.max_bytes - self.size
            if len(data) > room:
                if room:
                    self._keep(source, data[:room])
                self.truncated = True
                break
            self._keep(source, data)
        self.complete = True

    def pieces(self) -> list[tuple[str, str]]:
        return decoded_pieces(list(self.chunks))

    def text(self) -> str:
        return "".join(text for _, text in self.pieces())


def _extends(longer: list[tuple[str, bytes]], shorter: list[tuple[str, bytes]]) -> bool:
    """Whether `shorter` (merged chunks) is where `longer` (merged chunks) starts."""
    if not shorter:
        return True
    if len(longer) < len(shorter) or longer[:len(shorter) - 1] != shorter[:-1]:
        return False
    last_source, last = shorter[-1]
    source, data = longer[len(shorter) - 1]
    return source == last_source and data.startswith(last)


def decoded_pieces(chunks: Iterable[tuple[str, bytes]]) -> list[tuple[str, str]]:
    """Each (source, bytes) chunk as text, decoded per source, so a character split across two chunks of
    one stream (with the other stream's chunk between them) stays whole. NUL too is replaced: PostgreSQL
    text refuses it, and a failed final save would lose the output and exit status."""
    decoders = {source: codecs.getincrementaldecoder("utf-8")(errors="replace") for source in SOURCES}
    chunks = list(chunks)
    last = {source: index for index, (source, _) in enumerate(chunks)}
    pieces = []
    for index, (source, data) in enumerate(chunks):
        text = decoders[source].decode(data, final=last[source] == index).replace("\x00", "\ufffd")
        if text:
            pieces.append((source, text))
    return merged(pieces)


def merged(pieces: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for source, text in pieces:
        if out and out[-1][0] == source:
            out[-1] = (source, out[-1][1] + text)
        elif text:
            out.append((source, text))
    return out


def output_sources(pieces: Iterable[tuple[str, str]]) -> list[list]:
    """The stored form of the pieces' sources: [[source, characters of output], ...]."""
    return [[source, len(text)] for source, text in pieces]
