"""A plain HTTP request, or one inside an intercepted tunnel: identity, shape checks, the reserved
proposals host, the /decide round trip, then what an allow needs before mitmproxy forwards it (the
vetted address, the model-input trace, injected secrets, the dial pin and the echo scrubber)."""

from __future__ import annotations

from mitmproxy import http

from roster_gateway import metrics, model_flow, model_journal, model_websockets, proposals, shapes
from roster_gateway.client import ControlPlaneDown
from roster_gateway.decoding import narrow_accept_encoding
from roster_gateway.facts import client_address, decide_payload, strip_proxy_headers, token_from_header
from roster_gateway.mcp import MalformedBody, mcp_calls
from roster_gateway.responses import deny_flow
from roster_gateway.scrub import scrubber_for
from roster_gateway.steps import ConnState, Steps
from roster_gateway.swap import SwapRefused, apply_secrets
from roster_gateway.wire import WireDecision

RANGE_HEADERS = ("range", "if-range")


async def judge_request(steps: Steps, flow: http.HTTPFlow, state: ConnState) -> None:
    config = steps.config
    header_token = token_from_header(flow.request.headers.get("proxy-authorization"))
    # Inside a CONNECT tunnel the identity is the tunnel's; a header inside it is ignored.
    token = state.token if state.connect_target is not None else header_token
    strip_proxy_headers(flow.request)
    sni = flow.client_conn.sni if flow.request.scheme == "https" else None
    refusal = shapes.check_request(flow.request, config, connect_target=state.connect_target, sni=sni)
    if refusal is not None:
        deny_flow(flow, refusal.status, refusal.reason, refusal.message)
        return
    if model_websockets.refused_before_deciding(flow.request):
        deny_flow(flow, model_websockets.STATUS, model_websockets.REASON, model_websockets.MESSAGE)
        return
    if proposals.is_reserved(config, flow.request.host):
        await proposals.answer(steps, flow, token)  # answered here: never dialled, never /decide
        return
    try:
        body = flow.request.get_content(strict=True) or b""
        mcp = mcp_calls(flow.request.headers.get("content-type", ""), body)
    except (MalformedBody, ValueError) as exc:
        deny_flow(flow, 400, "malformed_request", f"unreadable request body: {exc}")
        return
    scheme = "https" if flow.request.scheme == "https" else "http"
    try:
        finder = await steps.sentinels.finder()
    except ControlPlaneDown as exc:
        deny_flow(flow, 503, "control_plane_unavailable", str(exc))
        return
    payload = decide_payload(flow.request, token=token or "", client=client_address(flow), scheme=scheme,
                             mcp=mcp, preview_bytes=config.body_preview_bytes,
                             sentinels=finder.found_in_request(flow.request, config.max_body_bytes))
    model_flow.note_request(flow, body, payload)
    decision = await steps.judge(flow, payload, token)
    if decision is None:
        return
    await _allow(steps, flow, decision, state)


async def _allow(steps: Steps, flow: http.HTTPFlow, decision: WireDecision, state: ConnState) -> None:
    request = flow.request
    if model_websockets.refused_on_model_host(request, decision.wire):
        steps.settle_unused(decision, model_websockets.STATUS, model_websockets.REASON)
        deny_flow(flow, model_websockets.STATUS, model_websockets.REASON, model_websockets.MESSAGE,
                  decision_id=decision.decision_id)
        return
    host = shapes.normalise_host(request.host)
    ip = await steps.vet_or_deny(flow, decision, host)
    if ip is None:
        return
    model_flow.before_forwarding(flow)
    if decision.trace:
        try:
            await steps.client.trace(decision.decision_id, request.raw_content or b"")
        except ControlPlaneDown as exc:
            steps.settle_unused(decision, 503, "trace_failed")
            deny_flow(flow, 503, "trace_failed", f"model input could not be traced: {exc}",
                      decision_id=decision.decision_id)
            return
    built: list[tuple[str, str]] = []
    try:
        apply_secrets(request, decision, built)
    except SwapRefused as exc:
        steps.settle_unused(decision, 400, "malformed_request")
        deny_flow(flow, 400, "malformed_request", str(exc), decision_id=decision.decision_id)
        return
    # Dial the vetted IP; Host header and TLS SNI keep the name (the addon's server_connect hook).
    request.data.host = ip
    state.dial_names[(ip, request.port)] = host
    flow.metadata["roster_decision_id"] = decision.decision_id
    flow.metadata["roster_grant"] = decision.grant
    # Real values stay in this flow's memory only, to scrub echoes from its response.
    scrubber = scrubber_for(decision.replace, decision.inject, built, steps.config.max_body_bytes)
    if scrubber is not None:
        flow.metadata["roster_scrubber"] = scrubber
        narrow_accept_encoding(request)
        # A byte range of an echo is a slice of the secret that no whole-value scrub can find, and
        # repeated ranges rebuild it: a secret-carrying request asks for the whole response.
        for name in RANGE_HEADERS:
            request.headers.pop(name, None)
    # The run journal's copy of what the upstream receives, credentials masked (model_journal.py).
    model_journal.capture_request(flow, decision, host)
    metrics.count_allow()
