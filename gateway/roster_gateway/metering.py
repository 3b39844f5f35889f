"""Metering one model call's response: usage read as the bytes pass, and, when the gateway asked upstream
for stream usage on the box's behalf, exactly that extra usage chunk removed from what the box receives
(every other event passes byte for byte), or, when an upstream puts that usage on its last content
chunk instead, the `usage` member removed from that one event.

`feed` takes the upstream's bytes in order (all at once for a buffered response, chunk by chunk for a
streamed one) and returns what the box gets; `feed(b"")` marks the end. Without a chunk to remove, bytes
come back at once; with one, an event is passed on when it is complete (the usage chunk is only known
as such when whole)."""

from __future__ import annotations

import json

from roster_gateway.model_calls import ModelCall
from roster_gateway.usage import (
    DEFAULT_MAX_EVENT_BYTES,
    SseSplitter,
    StreamMeter,
    Usage,
    parse_event,
    unknown,
    usage_from_json,
)


def is_event_stream(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "text/event-stream"


def _is_added_usage_chunk(doc: dict | None) -> bool:
    """The chunk `include_usage` adds: usage and no choices."""
    return doc is not None and doc.get("choices") == [] and isinstance(doc.get("usage"), dict)


def _without_usage(raw: bytes, doc: dict | None) -> bytes:
    """A content chunk on which an upstream put the usage the gateway asked for: the same event without
    its `usage` member (re-serialised compactly, as OpenAI sends it). An event of several lines, or one
    without usage, passes unchanged."""
    if doc is None or not isinstance(doc.get("usage"), dict):
        return raw
    line = raw.rstrip(b"\r\n")
    if not line.startswith(b"data:") or b"\n" in line or b"\r" in line:
        return raw
    rest = {key: value for key, value in doc.items() if key != "usage"}
    return (b"data: " + json.dumps(rest, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            + raw[len(line):])


class ResponseMeter:
    def __init__(self, call: ModelCall, *, content_type: str, status: int, strip_usage_chunk: bool,
                 max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.call = call
        self.sse = is_event_stream(content_type)
        self.status = status
        self.strip = strip_usage_chunk and self.sse
        self._splitter = SseSplitter(max_event_bytes)
        self._meter = StreamMeter(call.api, call.model)
        self._json: list[bytes] = []
        self._json_size = 0
        self._max = max_event_bytes
        self._done = False
        self._dropped = False  # the added usage chunk (one) was removed
        self.removed = 0  # usage the gateway asked for, removed from what the box gets (chunks or members)

    def feed(self, data: bytes) -> bytes:
        if self._done:
            return data
        if not self.sse:
            return self._feed_json(data)
        out = []
        for raw in self._splitter.feed(data):
            if not self._meter.may_carry_usage(raw):
                if self.strip:
                    out.append(raw)
                continue
            doc = self._meter.observe(*parse_event(raw))
            if self.strip and not self._dropped and _is_added_usage_chunk(doc):
                self._dropped = True
                self.removed += 1
                continue
            if self.strip:
                rewritten = _without_usage(raw, doc)
                self.removed += rewritten is not raw
                raw = rewritten
            out.append(raw)
        if self._splitter.overflowed:
            # Not an SSE stream this gateway can read: pass everything on from here, usage unknown.
            self._meter.fail("an event larger than the gateway reads")
            self._done = True
            return b"".join(out) + self._splitter.take_rest() if self.strip else data
        if data == b"":
            self._done = True
            rest = self._splitter.take_rest()
            if rest.strip():
                # a last event without its blank line
                self._meter.observe(*parse_event(rest), unterminated=True)
            return b"".join(out) + rest if self.strip else b""
        return b"".join(out) if self.strip else data

    def _feed_json(self, data: bytes) -> bytes:
        # A JSON answer is read whole; the gateway holds non-streamed bodies anyway (to scrub them).
        if self._json_size <= self._max:
            self._json.append(data)
            self._json_size += len(data)
        if data == b"":
            self._done = True
        return data

    def result(self) -> Usage:
        if not self.sse and self._json_size > self._max:
            usage = unknown("response larger than the gateway reads", self.call.model)
        elif not self.sse:
            usage = usage_from_json(self.call.api, b"".join(self._json), self.call.model)
        else:
            usage = self._meter.result()
        if self.status >= 400 and not usage.known:
            # Providers do not bill a refused call (rate limit, bad request, overload); charging its
            # worst case would drain a budget on errors. Recorded as zero, with why.
            return Usage(known=True, model=usage.model, problem=f"error response {self.status}, no usage")
        return usage
