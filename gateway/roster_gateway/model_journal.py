"""The run journal's capture (docs/journal.md): for every model call the decision says to journal
(`journal_max_bytes` above 0 in the /decide answer, docs/wire.md), the request as the upstream received it
(after credential injection) and the response as the upstream sent it, each body bounded by that number
(over it: kept truncated and flagged). Credentials never reach the journal: the flow's scrubber (scrub.py,
the same one that keeps echoes from the box) turns every injected value, in every encoding it knows,
back into the secret's sentinel in the captured headers and bodies, and a captured part that a decoder
could still read a real value from is withheld whole.

A streamed response is tapped as it passes (before metering and scrubbing change what the box sees), so
the journal holds the upstream's bytes. What was captured is handed to the journal reporter (the
outcome reporter's machinery, journal_reporter.py), which keeps it on disk until the control plane has
stored it. Flow metadata key: roster_journal."""

from __future__ import annotations

import base64
import logging
import time

from mitmproxy import http

from roster_gateway.decoding import DecodeRefused, bounded_content, content_codings
from roster_gateway.scrub import Scrubber, Unscrubbable
from roster_gateway.wire import WireDecision

log = logging.getLogger(__name__)

KEY = "roster_journal"
WITHHELD = "could not be checked for a credential"


class Capture:
    """One model call's journal entry while its flow is under way."""

    __slots__ = ("decision_id", "limit", "started", "sent", "scrubber", "chunks", "streamed_bytes")

    def __init__(self, decision_id: str, limit: int, sent: tuple, scrubber: Scrubber | None) -> None:
        self.decision_id = decision_id
        self.limit = limit
        self.started = time.time()
        # The request as forwarded: (method, url, header fields, raw body), all immutable; masked only in
        # finish(), after the response, so that work is not on the model call's way out.
        self.sent = sent
        self.scrubber = scrubber
        self.chunks: list[bytes] = []
        self.streamed_bytes = 0

    def tap(self, data: bytes) -> None:
        """A streamed piece as the upstream sent it: kept up to the bound, counted beyond."""
        kept = sum(map(len, self.chunks))
        if kept < self.limit and data:
            self.chunks.append(data[:self.limit - kept])
        self.streamed_bytes += len(data)


def _masked(scrubber: Scrubber | None, data: bytes) -> tuple[bytes, int, bool]:
    """(bytes, credentials masked, withheld): withheld when a reading still shows a real value."""
    if scrubber is None:
        return data, 0, False
    try:
        out, count = scrubber.scrub(data)
        scrubber.check_readings(out)
    except Unscrubbable:
        return b"", 0, True
    return out, count, False


def _headers(scrubber: Scrubber | None, fields) -> tuple[list[list[str]], int, bool]:
    out, total, withheld = [], 0, False
    for name, value in fields:
        masked_name, a, w1 = _masked(scrubber, name)
        masked_value, b, w2 = _masked(scrubber, value)
        if w1 or w2:
            withheld = True
            masked_value = b"[roster: withheld]"
        out.append([masked_name.decode("utf-8", "replace"), masked_value.decode("utf-8", "replace")])
        total += a + b
    return out, total, withheld


def _body(scrubber: Scrubber | None, data: bytes, limit: int, size: int | None = None) -> dict:
    size = len(data) if size is None else size
    masked, count, withheld = _masked(scrubber, data[:limit])
    part = {"size": size, "truncated": size > limit, "masked": count,
            "body_b64": base64.b64encode(masked).decode("ascii")}
    if withheld:
        part["withheld"] = WITHHELD
    return part


def _url(request: http.Request, host: str) -> str:
    default = 443 if request.scheme == "https" else 80
    port = "" if request.port == default else f":{request.port}"
    return f"{request.scheme}://{host}{port}{request.path}"


def capture_request(flow: http.HTTPFlow, decision: WireDecision, host: str) -> None:
    """Called once the request is final (secrets injected), before it is forwarded: keeps what was sent,
    untouched (header fields and body bytes are immutable); finish() masks it."""
    limit = decision.journal_max_bytes
    if limit <= 0 or flow.metadata.get("roster_model_call") is None:
        return
    request = flow.request
    sent = (request.method, _url(request, host), request.headers.fields, request.raw_content or b"")
    flow.metadata[KEY] = Capture(decision.decision_id, limit, sent, flow.metadata.get("roster_scrubber"))


def _request_entry(capture: Capture) -> dict:
    method, url, fields, raw = capture.sent
    headers, masked, withheld = _headers(capture.scrubber, fields)
    body = _body(capture.scrubber, raw, capture.limit)
    body["masked"] += masked
    entry = {"method": method, "url": url, "headers": headers, **body}
    if withheld:
        entry["headers_withheld"] = WITHHELD
    return entry


def tap_stream(flow: http.HTTPFlow) -> None:
    """A streamed response of a journaled call: every piece is copied before the gateway's own stream
    (metering, scrubbing) sees it."""
    capture: Capture | None = flow.metadata.get(KEY)
    stream = flow.response.stream if flow.response is not None else None
    if capture is None or not callable(stream):
        return

    def tapped(data: bytes):
        capture.tap(data)
        return stream(data)

    flow.response.stream = tapped


def _buffered_body(response: http.Response, limit: int) -> tuple[bytes, bool]:
    """The body as the upstream sent it; decoded (bounded) when it came content-encoded, so that the
    masking reads what a decoder would."""
    raw = response.raw_content or b""
    if not content_codings(response):
        return raw, False
    try:
        return bounded_content(response, max(limit, len(raw)) * 64), True
    except DecodeRefused:
        return raw, False


def finish(flow: http.HTTPFlow, error: str = "") -> dict | None:
    """The call's journal entry once its response has passed (or the upstream failed); None when the call
    is not journaled. Called before anything rewrites the buffered response."""
    capture: Capture | None = flow.metadata.pop(KEY, None)
    if capture is None:
        return None
    response = flow.response
    entry = {"decision_id": capture.decision_id, "started": round(capture.started, 6),
             "ended": round(time.time(), 6), "request": _request_entry(capture), "error": error[:200]}
    if response is not None:
        headers, masked, withheld = _headers(capture.scrubber, response.headers.fields)
        if capture.chunks or capture.streamed_bytes or callable(response.stream):
            body = _body(capture.scrubber, b"".join(capture.chunks), capture.limit, capture.streamed_bytes)
            body["streamed"] = True
        else:
            data, decoded = _buffered_body(response, capture.limit)
            body = _body(capture.scrubber, data, capture.limit)
            body["decoded"] = decoded
        body["masked"] += masked
        entry["response"] = {"status": response.status_code, "headers": headers, **body}
        if withheld:
            entry["response"]["headers_withheld"] = WITHHELD
    return entry
