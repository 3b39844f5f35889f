"""Refusals in the model provider's error shape (provider_errors.py, through the addon): the shape the
control plane's `wire` names, else the request's own, Roster's keys kept, and a final refusal marked."""

from __future__ import annotations

import pytest
from roster_gateway.provider_errors import provider_error, wire_of_request
from roster_gateway.wire import parse_decision

from tests.conftest import allow, answer, deny, make_flow, run_request


def _shape(body: dict) -> str:
    if body.get("type") == "error":
        return "anthropic"
    if isinstance(body["error"].get("code"), int):
        return "gemini"
    return "openai"


WIRES = [("openai-chat", "openai"), ("openai-responses", "openai"), ("anthropic-messages", "anthropic"),
         ("gemini", "gemini"), (None, "openai")]


@pytest.mark.parametrize("wire,shape", WIRES, ids=[str(w) for w, _ in WIRES])
async def test_a_deny_carries_the_wire_formats_error_and_roster_keys(gw, cp, wire, shape):
    cp.decide = deny("no_grant", wire=wire)
    flow = await run_request(gw, make_flow(path="/v1/anything"))
    body = answer(flow)
    assert _shape(body) == shape
    assert (body["verdict"], body["reason"], body["message"]) == ("deny", "no_grant", "denied: no_grant")
    assert "no_grant" in body["error"]["message"] and "denied: no_grant" in body["error"]["message"]
    if shape == "gemini":
        assert body["error"]["code"] == 403 and body["error"]["status"] == "PERMISSION_DENIED"
    else:
        assert body["error"]["type"] == "roster_no_grant"


REQUESTS = [
    ("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", [], "gemini"),
    ("/v1/anything", [("x-goog-api-key", "AIza-sentinel")], "gemini"),
    ("/v1/messages", [], "anthropic"),
    ("/api/claude_cli/bootstrap", [("anthropic-version", "2023-06-01")], "anthropic"),
    ("/v1/chat/completions", [], "openai"),
    ("/v1/responses", [], "openai"),
    ("/anything/else", [], "openai"),
]


@pytest.mark.parametrize("path,headers,shape", REQUESTS, ids=[r[0] for r in REQUESTS])
async def test_without_a_wire_the_requests_own_shape_picks_the_error(gw, cp, path, headers, shape):
    cp.decide = deny("no_grant")
    flow = await run_request(gw, make_flow(path=path, headers=headers))
    assert _shape(answer(flow)) == shape


async def test_the_control_planes_wire_wins_over_the_requests_shape(gw, cp):
    cp.decide = deny("no_grant", wire="openai-chat")
    flow = await run_request(gw, make_flow(path="/v1/messages", headers=[("anthropic-version", "1")]))
    assert _shape(answer(flow)) == "openai"


async def test_a_gateway_refusal_after_an_allow_keeps_the_hosts_shape(gw, cp):
    cp.decide = allow(trace=True, wire="gemini")
    cp.trace_status = 500
    flow = await run_request(gw, make_flow(method="POST", content=b"{}", path="/v1/x",
                                           headers=[("content-type", "application/json")]))
    assert answer(flow)["reason"] == "trace_failed" and _shape(answer(flow)) == "gemini"
    assert answer(flow)["error"]["status"] == "UNAVAILABLE"


FINAL = [("no_grant", 403, "false"), ("tripwire", 403, "false"), ("over_budget", 402, "false"),
         ("bad_token", 407, "false"), ("policy_error", 503, None)]


@pytest.mark.parametrize("reason,status,retry", FINAL, ids=[f[0] for f in FINAL])
async def test_a_final_refusal_tells_the_sdk_not_to_retry(gw, cp, reason, status, retry):
    cp.decide = deny(reason, status)
    flow = await run_request(gw, make_flow())
    assert flow.response.status_code == status
    assert flow.response.headers.get("x-should-retry") == retry


async def test_a_malformed_request_is_final_too(gw, cp):
    flow = await run_request(gw, make_flow(headers=[("x-http-method-override", "DELETE")]))
    assert flow.response.status_code == 400
    assert flow.response.headers["x-should-retry"] == "false"
    assert answer(flow)["error"]["type"] == "roster_malformed_request"


async def test_control_plane_down_may_be_retried(gw, cp):
    cp.fail_status = 500
    flow = await run_request(gw, make_flow())
    assert flow.response.status_code == 503
    assert "x-should-retry" not in flow.response.headers
    assert answer(flow)["error"]["type"] == "roster_control_plane_unavailable"


@pytest.mark.parametrize("value", ["grpc-web", "", None])
def test_an_unknown_or_absent_wire_is_no_shape_and_no_error(value):
    assert parse_decision(deny("no_grant", wire=value)).wire == ""


def test_a_wire_that_is_not_a_string_is_a_wire_error():
    from roster_gateway.wire import WireError
    with pytest.raises(WireError):
        parse_decision(deny("no_grant", wire=7))


def test_the_shapes_name_only_reason_and_message():
    for wire in ("openai-chat", "anthropic-messages", "gemini", ""):
        error = provider_error(wire, 403, "tripwire", "a sentinel went to x")
        assert "tripwire" in str(error) and "a sentinel went to x" in str(error)
    assert wire_of_request("POST", "/V1BETA/MODELS/G:GENERATECONTENT", {}) == "gemini"
