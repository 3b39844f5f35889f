"""A model call's path through the gateway, step by step, for the addon to call: its facts go to /decide
(the control plane reserves its worst case), a streamed chat completion asks upstream for usage, the
response is metered (streamed as it arrives, or read whole when buffered) and its usage goes out with
the outcome. Flow metadata keys: roster_model_call, roster_strip_usage, roster_stream."""

from __future__ import annotations

import logging

from mitmproxy import http

from roster_gateway.decoding import DecodeRefused, bounded_content
from roster_gateway.metering import ResponseMeter
from roster_gateway.model_calls import ModelCall, ask_for_stream_usage, model_call_of
from roster_gateway.streaming import ResponseStream, start_stream, streamable
from roster_gateway.usage import unknown

log = logging.getLogger(__name__)


def note_request(flow: http.HTTPFlow, body: bytes, payload: dict) -> None:
    """Tell /decide about a model call (the decoded body is what the upstream reads)."""
    call = model_call_of(flow.request.method, flow.request.path, body)
    if call is not None:
        flow.metadata["roster_model_call"] = call
        payload["model_call"] = call.as_wire()


def before_forwarding(flow: http.HTTPFlow) -> None:
    """A streamed chat completion that did not ask for usage asks for it now; the box never sees the
    extra chunk. Called before the trace, so the trace holds the bytes actually sent."""
    call: ModelCall | None = flow.metadata.get("roster_model_call")
    if call is None:
        return
    new_body = ask_for_stream_usage(call, flow.request.get_content(strict=True) or b"")
    if new_body is not None:
        flow.request.content = new_body  # re-encoded in the request's own content-encoding
        flow.metadata["roster_strip_usage"] = True


def _meter(flow: http.HTTPFlow, call: ModelCall) -> ResponseMeter:
    return ResponseMeter(call, content_type=flow.response.headers.get("content-type", ""),
                         status=flow.response.status_code,
                         strip_usage_chunk=bool(flow.metadata.get("roster_strip_usage")))


def on_response_headers(flow: http.HTTPFlow) -> None:
    """Stream an allowed SSE response instead of buffering it (roster_gateway.streaming)."""
    if "roster_decision_id" not in flow.metadata or flow.response is None or not streamable(flow):
        return
    call: ModelCall | None = flow.metadata.get("roster_model_call")
    meter = _meter(flow, call) if call is not None else None
    flow.metadata["roster_stream"] = start_stream(flow, meter, flow.metadata.get("roster_scrubber"))


def streamed(flow: http.HTTPFlow) -> ResponseStream | None:
    return flow.metadata.get("roster_stream")


def finish_streamed(flow: http.HTTPFlow, stream: ResponseStream) -> tuple[str, int, dict | None]:
    """At the end of a streamed response: (outcome error, scrubbed count, usage). A stream that could
    not be scrubbed is killed, so the box sees it cut rather than ended."""
    flow.metadata.pop("roster_scrubber", None)
    error, scrubbed = "", 0
    if stream.scrubber is not None:
        scrubbed = stream.scrubber.count
        if flow.response.trailers is not None:
            try:
                fields, count = stream.scrubber.scrub_fields(flow.response.trailers.fields)
                flow.response.trailers.fields = fields
                scrubbed += count
            except Exception:  # noqa: BLE001 - trailers that cannot be checked are dropped
                flow.response.trailers = None
        if stream.scrubber.failed:
            log.warning("streamed response to %s cut: not checkable for echoed secrets",
                        flow.metadata.get("roster_grant"))
            flow.kill()
            error = "stream cut: could not be checked for an echoed secret"
    usage = stream.meter.result().as_wire() if stream.meter is not None else None
    return error, scrubbed, usage


def buffered_usage(flow: http.HTTPFlow, max_bytes: int) -> dict | None:
    """Usage of a whole response (before scrubbing, which may withhold it), removing the usage chunk
    the gateway asked for from the body. None when the flow is not a model call."""
    call: ModelCall | None = flow.metadata.get("roster_model_call")
    if call is None or flow.response is None:
        return None
    try:
        body = bounded_content(flow.response, max_bytes) or b""
    except (DecodeRefused, ValueError) as exc:
        return unknown(f"undecodable body: {type(exc).__name__}", call.model).as_wire()
    meter = _meter(flow, call)
    out = meter.feed(body) + meter.feed(b"")
    if meter.removed:
        flow.response.content = out
    return meter.result().as_wire()


def usage_on_error(flow: http.HTTPFlow) -> dict | None:
    """The upstream failed mid-call: what a stream read so far (usually nothing: worst case)."""
    stream = streamed(flow)
    if stream is not None and stream.meter is not None:
        return stream.meter.result().as_wire()
    call = flow.metadata.get("roster_model_call")
    return unknown("upstream error", call.model).as_wire() if call is not None else None
