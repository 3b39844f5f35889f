"""WebSockets toward model APIs are refused with a legible, final reason (model_websockets.py, through the
addon); other WebSockets are judged like any request."""

from __future__ import annotations

import pytest

from tests.conftest import allow, answer, make_flow, reported, run_request, settle

UPGRADE = [("upgrade", "websocket"), ("connection", "Upgrade"), ("sec-websocket-version", "13"),
           ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")]
MODEL_PATHS = ["/v1/responses", "/v1/chat/completions", "/v1/messages", "/v1/realtime?model=gpt-4o",
               "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
               "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "/V1/RESPONSES/"]


@pytest.mark.parametrize("path", MODEL_PATHS)
async def test_a_websocket_to_a_model_api_path_is_refused_before_deciding(gw, cp, path):
    cp.decide = allow(grant="openai")  # even a grant that would allow it
    flow = await run_request(gw, make_flow(path=path, headers=UPGRADE))
    assert flow.response.status_code == 403
    body = answer(flow)
    assert body["reason"] == "protocol_refused" and "WebSocket to a model API" in body["message"]
    assert "WebSocket" in body["error"]["message"]
    assert flow.response.headers["x-should-retry"] == "false"
    assert cp.bodies("/decide") == []


async def test_a_websocket_to_a_model_host_is_refused_after_deciding_and_settled(gw, cp):
    cp.decide = allow(wire="openai-responses", decision_id="dc_ws")
    flow = await run_request(gw, make_flow(path="/v1/some/new/stream", headers=UPGRADE))
    assert flow.response.status_code == 403 and answer(flow)["reason"] == "protocol_refused"
    assert answer(flow)["decision_id"] == "dc_ws"
    await settle(gw)
    [outcome] = reported(cp)
    assert outcome["decision_id"] == "dc_ws" and outcome["request_bytes"] == 0
    assert "roster_grant" not in flow.metadata  # websocket_start would kill it anyway


async def test_the_same_request_over_http_is_not_refused(gw, cp):
    cp.decide = allow(wire="openai-responses")
    flow = await run_request(gw, make_flow(path="/v1/responses", method="POST", content=b"{}",
                                           headers=[("content-type", "application/json")]))
    assert flow.response is None


async def test_a_websocket_elsewhere_is_judged_like_any_request(gw, cp):
    cp.decide = allow()
    flow = await run_request(gw, make_flow(path="/socket", headers=UPGRADE))
    assert flow.response is None and len(cp.bodies("/decide")) == 1
