"""Streamed responses pass through as they arrive. An allowed flow whose response is an event stream
(SSE) is not buffered: each piece the upstream sends goes on to the box at once, after metering (usage
read as it passes, the usage chunk the gateway asked for removed) and echo scrubbing.

Scrubbing a stream holds back at most as many bytes as the longest encoded form of the flow's secrets,
less one, and only while they could be the beginning of one: every complete form in what has arrived is
replaced, and what is passed on ends before any place a form could still be completing. An event whose
end is not the beginning of a form goes on whole at once. A stream that cannot be scrubbed (echoes that
do not go away) is cut: nothing more reaches the box and the flow is killed at its end, so the box never
sees a clean ending.

Streamed only when it is safe to read the bytes as they come: an identity-encoded SSE body, not a
partial response, not a websocket. Everything else keeps the gateway's buffering."""

from __future__ import annotations

import bisect
import hashlib
import logging
import re

from mitmproxy import http

from roster_gateway.metering import ResponseMeter, is_event_stream
from roster_gateway.scrub import Scrubber

log = logging.getLogger(__name__)


# How much of what already went to the box is read again, with what is held and what just arrived, the
# way a decoder would read it (unescape.py): an echo escaped character by character (`\u0072&#101;…`) has
# no fixed form to hold back for, so the stream is cut as soon as such a reading shows a real value. A
# secret escaped with more than this much padding in total is beyond what a stream re-reads. Within it,
# the re-read starts after the last separator already sent (unescape.SEPARATORS: no reading finds a real
# value across one, so what lies before it was read in full by an earlier piece's check): in a JSON
# event stream that is a few bytes, so the cost per piece follows the piece, not this bound.
REREAD_BYTES = 8 * 1024
_ALL_BYTES = bytes(range(256))
_ESCAPE_MARK = re.compile(rb"[\\&%]")  # JSON, HTML and percent escapes begin with these


class StreamScrubber:
    """Scrubs a byte stream piece by piece, holding back the longest tail that begins a form."""

    def __init__(self, scrubber: Scrubber) -> None:
        self._scrubber = scrubber
        self._hold = max(scrubber.longest_form - 1, 0)
        # Sorted, the forms that begin with a given tail follow it at once (bisect in _begins_a_form).
        self._forms = sorted(scrubber.forms)
        firsts = bytes(sorted({form[0] for form in self._forms}))
        self._firsts = re.compile(b"[" + re.escape(firsts) + b"]") if firsts else None
        self._form_bytes = frozenset(b"".join(self._forms))
        separators = getattr(scrubber, "separators", b"")
        # rstrip of every other byte leaves what ends with the last separator: its length is where
        # what follows the last separator begins (0 when there is none).
        self._not_separators = _ALL_BYTES.translate(None, separators) if separators else b""
        self._pending = b""
        self._sent_tail = b""  # the last REREAD_BYTES sent
        self._since_separator = b""  # what was sent after the last separator (at most REREAD_BYTES)
        self.count = 0
        self.failed = False

    def feed(self, data: bytes, *, end: bool = False) -> bytes:
        """What may go on to the box now; at the `end`, everything left."""
        if self.failed:
            return b""
        try:
            scrubbed, count = self._scrubber.scrub(self._pending + data)
            self._scrubber.check_readings(self._reread(scrubbed) + scrubbed)
        except Exception:  # noqa: BLE001 - an unscrubbable stream is cut, never forwarded as it is
            self.failed = True
            self._pending = b""
            return b""
        self.count += count
        cut = len(scrubbed) if end else len(scrubbed) - self._held_tail(scrubbed)
        out, self._pending = scrubbed[:cut], scrubbed[cut:]
        if out:
            self._sent(out)
        return out

    def _reread(self, scrubbed: bytes) -> bytes:
        """The part of what was sent to read again with `scrubbed`: from the last separator on, or the
        whole tail when a separator cannot bound a reading (bytes with NUL have UTF-16 readings)."""
        if self._not_separators and b"\x00" not in scrubbed and b"\x00" not in self._sent_tail:
            return self._since_separator
        return self._sent_tail

    def _sent(self, out: bytes) -> None:
        self._sent_tail = (self._sent_tail + out)[-REREAD_BYTES:]
        after = len(out.rstrip(self._not_separators)) if self._not_separators else 0
        if after:
            self._since_separator = out[after:][-REREAD_BYTES:]
        else:
            self._since_separator = (self._since_separator + out)[-REREAD_BYTES:]

    def _held_tail(self, data: bytes) -> int:
        """How many bytes at the end of `data` could be the start of a form still arriving. Whatever ends
        earlier is either a whole form (already replaced) or no form at all. Near an escape character an
        echo may be escaped character by character (no fixed form): the window is held then, from its
        last separator on (an escaped echo holds no separator, so one still arriving began after it)."""
        if not self._hold or self._firsts is None:
            return 0
        window = data[-self._hold:]
        if _ESCAPE_MARK.search(window):
            after = 0
            if self._not_separators and b"\x00" not in window:
                after = len(window.rstrip(self._not_separators))
            if after == 0 or _ESCAPE_MARK.search(window, after):
                return len(window) - after
        if not window or window[-1] not in self._form_bytes:
            return 0  # a form's beginning holds only bytes of forms (an event's closing LF is none)
        # Longest first: only where a form's first byte stands can a form begin.
        for match in self._firsts.finditer(window):
            if self._begins_a_form(window[match.start():]):
                return len(window) - match.start()
        return 0

    def _begins_a_form(self, tail: bytes) -> bool:
        """Whether `tail` is a proper beginning of some form."""
        at = bisect.bisect_left(self._forms, tail)
        while at < len(self._forms) and self._forms[at] == tail:
            at += 1  # a whole form is not a beginning, unless a longer form starts with it
        return at < len(self._forms) and self._forms[at].startswith(tail)


class ResponseStream:
    """The per-flow callable mitmproxy calls with each piece of the upstream's body (b"" at the end)."""

    def __init__(self, meter: ResponseMeter | None, scrubber: StreamScrubber | None) -> None:
        self.meter = meter
        self.scrubber = scrubber
        self.upstream_bytes = 0
        # The outcome's response_sha256: of the bytes as the upstream sent them, before metering or
        # scrubbing changes any, hashed piece by piece so a stream is never held whole.
        self.upstream_sha256 = hashlib.sha256()

    def __call__(self, data: bytes) -> list[bytes]:
        """The pieces to send on; never an empty piece (in HTTP/1.1 chunked framing an empty chunk would
        end the box's response early)."""
        self.upstream_bytes += len(data)
        self.upstream_sha256.update(data)
        out = self.meter.feed(data) if self.meter is not None else data
        if self.scrubber is not None:
            out = self.scrubber.feed(out, end=data == b"")
        return [out] if out else []


def _identity(response: http.Response) -> bool:
    encodings = [v.strip().lower() for v in response.headers.get_all("content-encoding")]
    transfer = [v.strip().lower() for v in response.headers.get_all("transfer-encoding")]
    return all(e in ("", "identity") for e in encodings) and all(t == "chunked" for t in transfer)


def streamable(flow: http.HTTPFlow) -> bool:
    response = flow.response
    if response is None or not is_event_stream(response.headers.get("content-type", "")):
        return False
    if response.status_code in (101, 206) or "content-range" in response.headers:
        return False
    return _identity(response)


def start_stream(flow: http.HTTPFlow, meter: ResponseMeter | None,
                 scrubber: Scrubber | None) -> ResponseStream:
    """Stream this flow's response: headers and reason phrase scrubbed now (they go out first)."""
    stream_scrubber = StreamScrubber(scrubber) if scrubber is not None else None
    if scrubber is not None:
        fields, count = scrubber.scrub_fields(flow.response.headers.fields)
        flow.response.headers.fields = fields
        reason, more = scrubber.scrub(flow.response.data.reason or b"")
        flow.response.data.reason = reason
        stream_scrubber.count += count + more
    stream = ResponseStream(meter, stream_scrubber)
    flow.response.stream = stream
    return stream
