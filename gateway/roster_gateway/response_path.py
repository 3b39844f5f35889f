"""What comes back for an allowed request: the response streamed or buffered, echoes of injected secrets
scrubbed, a model call's usage read, and the outcome reported; likewise for an upstream error and for
websocket messages from the server. The addon's response-side hooks call these."""

from __future__ import annotations

import hashlib
import logging

from mitmproxy import http

from roster_gateway import metrics, model_flow, model_journal
from roster_gateway.scrub import scrub_echoes, scrub_error
from roster_gateway.steps import Steps

log = logging.getLogger("roster_gateway")


def start_response(flow: http.HTTPFlow) -> None:
    """Response headers are in: stream an allowed event stream, or buffer the response."""
    try:
        model_flow.on_response_headers(flow)
        model_journal.tap_stream(flow)
    except Exception:  # noqa: BLE001 - a stream that could not be set up safely is not streamed
        log.exception("could not stream the response; buffering it")
        flow.response.stream = False
        flow.metadata.pop("roster_stream", None)


def finish_response(steps: Steps | None, flow: http.HTTPFlow) -> None:
    """The whole response has passed (or is about to): scrub it and report the decision's outcome."""
    decision_id = flow.metadata.pop("roster_decision_id", None)
    if flow.response is None:
        flow.metadata.pop("roster_scrubber", None)
        return
    _journal(steps, flow)  # before the buffered body is metered and scrubbed: the upstream's bytes
    stream = model_flow.streamed(flow)
    if stream is not None:
        error, scrubbed, usage = model_flow.finish_streamed(flow, stream)
        response_bytes, digest = stream.upstream_bytes, stream.upstream_sha256.hexdigest()
    else:
        # The status as the upstream sent it, before scrubbing may withhold the body with a 502; the
        # digest of the body as received (still content-encoded, before scrubbing replaces anything).
        raw = flow.response.raw_content or b""
        status, response_bytes = flow.response.status_code, len(raw)
        digest = hashlib.sha256(raw).hexdigest() if decision_id else None
        usage = model_flow.buffered_usage(flow, steps.config.max_body_bytes) if steps else None
        error = scrub_echoes(flow, decision_id)
        scrubbed = flow.metadata.get("roster_scrubbed", 0)
    metrics.count_scrubbed(scrubbed)
    if decision_id:
        steps.report(decision_id, flow.response.status_code if stream else status,
                     len(flow.request.raw_content or b""), response_bytes, error, scrubbed, usage, digest)


def upstream_failed(steps: Steps | None, flow: http.HTTPFlow) -> None:
    """The upstream failed: its error scrubbed of secrets and reported as the decision's outcome (502)."""
    scrubber = flow.metadata.pop("roster_scrubber", None)
    decision_id = flow.metadata.pop("roster_decision_id", None)
    message = flow.error.msg if flow.error else "upstream error"
    if scrubber is not None and flow.error is not None:
        message = scrub_error(flow, scrubber)
        metrics.count_scrubbed(flow.metadata.get("roster_scrubbed", 0))
    _journal(steps, flow, message)
    if decision_id:
        metrics.UPSTREAM_ERRORS.inc()
        steps.report(decision_id, 502, len(flow.request.raw_content or b""), 0, message[:200],
                     flow.metadata.get("roster_scrubbed", 0), model_flow.usage_on_error(flow))


def _journal(steps: Steps | None, flow: http.HTTPFlow, error: str = "") -> None:
    """A journaled model call's entry to the journal reporter; a failure here loses the entry, never
    the response."""
    try:
        entry = model_journal.finish(flow, error)
    except Exception:  # noqa: BLE001 - the box's response must not depend on the journal's copy
        log.exception("model call not journaled")
        return
    if entry is not None and steps is not None and steps.journal is not None:
        steps.journal.send(entry)


def scrub_websocket_message(flow: http.HTTPFlow) -> None:
    """A message from the server on a secret-carrying websocket: scrubbed, or dropped and the flow closed."""
    scrubber = flow.metadata.get("roster_scrubber")
    if scrubber is not None and flow.websocket is not None:
        message = flow.websocket.messages[-1]
        if not message.from_client:
            try:
                message.content, count = scrubber.scrub(message.content)
                scrubber.check_readings(message.content)
            except Exception:  # noqa: BLE001 - a hook error would forward the message unscrubbed
                log.warning("websocket message could not be checked for an echoed secret; closing")
                message.drop()
                flow.kill()
                return
            metrics.count_scrubbed(count)
            if count:
                log.warning("scrubbed %d echo(es) of an injected secret from a websocket message", count)
