"""The reserved proposals name: answered by the gateway itself with the run's token, never dialled, never
judged by /decide, identity never taken from the request."""

from __future__ import annotations

import base64
import json

import pytest
from mitmproxy import exceptions

from tests.conftest import make_flow

HOST = "proposals.roster.invalid"
UUID = "0b7e2d1c-49a6-4a43-9d55-3f3c1a0a7c11"


async def send(gw, flow):
    gw.requestheaders(flow)
    await gw.request(flow)
    return flow


def propose_flow(body: dict | bytes, **kw):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    kw.setdefault("headers", [("Content-Type", "application/json")])
    return make_flow(host=HOST, method="POST", path="/v1/proposals", content=content, **kw)


async def test_submit_goes_to_the_control_plane_with_the_token_never_decide(gw, cp):
    body = {"kind": "webhook", "destination": "hooks", "payload": {"run": 7, "worker": "other"}}
    flow = await send(gw, propose_flow(body, headers=[("Content-Type", "application/json"),
                                                      ("X-Roster-Run", "7")]))
    assert flow.response.status_code == 201
    assert json.loads(flow.response.content) == {"id": "p1", "status": "pending"}
    assert cp.paths() == ["/proposals"]  # no /decide, nothing dialled
    sent = cp.bodies("/proposals")[0]
    assert sent["token"] == "rt_good" and set(sent) == {"token", "client", "body_b64"}
    assert sent["client"] == flow.client_conn.peername[0]  # the box's end: the token is bound to it
    assert json.loads(base64.b64decode(sent["body_b64"])) == body


async def test_status_poll(gw, cp):
    cp.proposal_answer = {"status": 200, "body": {"id": UUID, "status": "executed"}}
    flow = await send(gw, make_flow(host=HOST, path=f"/v1/proposals/{UUID}"))
    assert flow.response.status_code == 200
    assert cp.paths() == [f"/proposals/{UUID}/status"]
    assert cp.bodies("/status")[0] == {"token": "rt_good", "client": flow.client_conn.peername[0]}


async def test_no_token_is_407_and_nothing_asked(gw, cp):
    flow = await send(gw, propose_flow({"kind": "webhook"}, token=None))
    assert flow.response.status_code == 407
    assert cp.calls == []


@pytest.mark.parametrize(("method", "path", "status"), [
    ("GET", "/v1/proposals", 405), ("DELETE", f"/v1/proposals/{UUID}", 405), ("GET", "/admin", 404),
    ("GET", "/v1/proposals/../../decide", 400),  # dot segments: refused by the shape checks first
])
async def test_other_paths_and_methods(gw, cp, method, path, status):
    flow = await send(gw, make_flow(host=HOST, method=method, path=path))
    assert flow.response.status_code == status
    assert cp.calls == []


async def test_non_json_goes_to_the_control_plane_which_judges_and_audits_it(gw, cp):
    cp.proposal_answer = {"status": 422, "body": {"error": "invalid_proposal"}}
    flow = await send(gw, propose_flow(b"kind=webhook", headers=[("Content-Type", "text/plain")]))
    assert flow.response.status_code == 422 and cp.paths() == ["/proposals"]


async def test_control_plane_down_is_503(gw, cp):
    cp.fail_status = 500
    flow = await send(gw, propose_flow({"kind": "webhook"}))
    assert flow.response.status_code == 503


async def test_unexpected_status_from_control_plane_becomes_502(gw, cp):
    cp.proposal_answer = {"status": 302, "body": {}}
    flow = await send(gw, propose_flow({"kind": "webhook"}))
    assert flow.response.status_code == 502


async def test_similar_names_are_ordinary_hosts(gw, cp):
    flow = await send(gw, make_flow(host="proposals.roster.invalid.example.com", path="/v1/proposals"))
    assert "/proposals" not in cp.paths() and cp.paths() == ["/decide"]
    assert flow.response is not None or flow.request.host != HOST


def test_reserved_name_must_be_under_invalid(gw):
    with pytest.raises(exceptions.OptionsError):
        gw.tctx.configure(gw, roster_proposals_host="proposals.example.com")


async def test_https_to_the_reserved_name_is_intercepted_without_decide_and_answered_inside(gw, cp):
    connect = make_flow(method="CONNECT", host=HOST, port=443, path="", host_header=f"{HOST}:443")
    await gw.http_connect(connect)
    assert connect.response is None and cp.calls == []  # intercepted; nothing decided, nothing dialled
    state = gw.conns[connect.client_conn.id]
    assert not state.tunnel and state.token == "rt_good"
    inner = propose_flow({"kind": "webhook"}, scheme="https", port=443, token=None, sni=HOST)
    inner.client_conn = connect.client_conn
    await send(gw, inner)
    assert inner.response.status_code == 201
    assert cp.paths() == ["/proposals"] and cp.bodies("/proposals")[0]["token"] == "rt_good"
