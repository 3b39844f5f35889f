"""CONNECT (tunnel.py): tunnel grants pass through to the vetted address, anything else is intercepted."""

from __future__ import annotations

import json

from mitmproxy.proxy import layers
from mitmproxy.proxy.context import Context

from tests.conftest import PUBLIC_IP, allow, deny, make_flow


def connect_flow(token="rt_good",  # noqa: S107
                 host=PUBLIC_IP, port=443):
    flow = make_flow(method="CONNECT", host=host, port=port, token=token, path="",
                     host_header=f"{host}:{port}")
    return flow


async def test_connect_without_token_is_407_and_not_decided(gw, cp):
    flow = connect_flow(token=None)
    await gw.http_connect(flow)
    assert flow.response.status_code == 407
    assert "proxy-authenticate" in flow.response.headers
    assert cp.bodies("/decide") == []


async def test_connect_without_tunnel_grant_is_intercepted(gw, cp):
    cp.decide = deny("no_grant")
    flow = connect_flow()
    await gw.http_connect(flow)
    assert flow.response is None  # mitmproxy answers 200 and intercepts
    state = gw.conns[flow.client_conn.id]
    assert not state.tunnel and state.connect_target == (PUBLIC_IP, 443) and state.token == "rt_good"
    sent = cp.bodies("/decide")[0]
    assert sent["method"] == "CONNECT" and sent["scheme"] == "tunnel" and sent["port"] == 443
    assert "proxy-authorization" not in flow.request.headers


async def test_connect_with_bad_token_is_407(gw, cp):
    cp.decide = deny("bad_token", 407)
    flow = connect_flow(token="rt_bad")
    await gw.http_connect(flow)
    assert flow.response.status_code == 407


async def test_connect_with_tunnel_grant_passes_through_to_vetted_ip(gw, cp):
    cp.decide = allow(tunnel=True, grant="pinned")
    flow = connect_flow()
    await gw.http_connect(flow)
    assert flow.response is None
    state = gw.conns[flow.client_conn.id]
    assert state.tunnel and state.dial_names[(PUBLIC_IP, 443)] == PUBLIC_IP

    class FakeNextLayer:
        def __init__(self, context):
            self.context, self.layer = context, None

    nl = FakeNextLayer(Context(flow.client_conn, gw.tctx.options))
    gw.next_layer(nl)
    assert isinstance(nl.layer, layers.TCPLayer)


async def test_tunnel_to_loopback_is_refused(gw, cp):
    cp.decide = allow(tunnel=True)
    flow = connect_flow(host="localhost", port=22)
    await gw.http_connect(flow)
    assert flow.response.status_code == 403
    assert json.loads(flow.response.content)["reason"] == "blocked_address"


async def test_inner_requests_use_the_connect_token(gw, cp):
    cp.decide = deny("no_grant")
    flow = connect_flow()
    await gw.http_connect(flow)
    cp.decide = allow()
    inner = make_flow(scheme="https", port=443, token="rt_other_in_header", sni=PUBLIC_IP)
    inner.client_conn = flow.client_conn
    await gw.request(inner)
    assert inner.response is None
    assert cp.bodies("/decide")[1]["token"] == "rt_good"
    assert "proxy-authorization" not in inner.request.headers
