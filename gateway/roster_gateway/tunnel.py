"""CONNECT: judged for tunnel grants only. With a tunnel grant the bytes pass through uninspected to the
vetted address; without one the tunnel is intercepted and every request inside it is judged."""

from __future__ import annotations

from mitmproxy import http

from roster_gateway import metrics, proposals, shapes
from roster_gateway.client import ControlPlaneDown
from roster_gateway.facts import client_address, decide_payload, strip_proxy_headers, token_from_header
from roster_gateway.responses import deny_flow
from roster_gateway.steps import ConnState, Steps, deny_decision

# Denials that end the CONNECT itself; any other deny only means "no tunnel grant": intercept instead.
_FINAL_DENIALS = frozenset({"bad_token", "over_budget"})


async def judge_connect(steps: Steps, flow: http.HTTPFlow, state: ConnState) -> None:
    request = flow.request
    token = token_from_header(request.headers.get("proxy-authorization"))
    strip_proxy_headers(request)
    host = shapes.normalise_host(request.host)
    if not token:
        deny_flow(flow, 407, "bad_token", "proxy credentials (the run token) are required")
        return
    if not host or not 0 < request.port < 65536:
        deny_flow(flow, 400, "malformed_request", "CONNECT needs host:port")
        return
    state.token = token
    state.connect_target = (host, request.port)
    if proposals.is_reserved(steps.config, host):
        return  # intercepted; the gateway answers the requests inside itself (roster_gateway.proposals)
    payload = decide_payload(request, token=token, client=client_address(flow), scheme="tunnel", mcp=(),
                             preview_bytes=steps.config.body_preview_bytes)
    try:
        decision = await steps.decide(payload)
    except ControlPlaneDown as exc:
        deny_flow(flow, 503, "control_plane_unavailable", str(exc))
        return
    if decision.verdict == "deny":
        if decision.reason in _FINAL_DENIALS:
            deny_decision(flow, decision)
        return  # no tunnel grant: intercept, and judge each request inside
    if not decision.tunnel:
        steps.settle_unused(decision, 0, "intercepted: not a tunnel grant")
        return
    ip = await steps.vet_or_deny(flow, decision, host)
    if ip is None:
        return
    request.data.host = ip  # mitmproxy dials (request.host, request.port) after this hook
    state.dial_names[(ip, request.port)] = host
    state.tunnel = True
    metrics.count_allow()
    # Bytes inside a tunnel are invisible; the ledger counts the call (status 200, bytes unknown).
    steps.report(decision.decision_id, 200, 0, 0, "")
