"""The last dial gate, and protocols other than HTTP (CONNECT itself: test_tunnel.py)."""

from __future__ import annotations

from mitmproxy import connection
from mitmproxy.proxy.server_hooks import ServerConnectionHookData
from mitmproxy.test import tflow

from tests.conftest import PUBLIC_IP, make_flow


def _server_hook_data(client, address, sni=None):
    server = connection.Server(address=address)
    server.sni = sni
    return ServerConnectionHookData(server=server, client=client)


async def test_server_connect_refuses_any_unvetted_dial(gw, cp):
    flow = make_flow()
    data = _server_hook_data(flow.client_conn, ("evil.example", 80))
    gw.server_connect(data)
    assert data.server.error


async def test_server_connect_keeps_the_name_as_sni(gw, cp):
    flow = make_flow(host="93.184.216.34", scheme="https", port=443)
    flow.request.data.host = "93.184.216.34"
    await gw.request(flow)
    gw.conns[flow.client_conn.id].dial_names[(PUBLIC_IP, 443)] = "example.com"
    data = _server_hook_data(flow.client_conn, (PUBLIC_IP, 443), sni=PUBLIC_IP)
    gw.server_connect(data)
    assert not data.server.error and data.server.sni == "example.com"


def test_raw_tcp_and_udp_are_killed(gw):
    t, u = tflow.ttcpflow(), tflow.tudpflow()
    gw.tcp_start(t)
    gw.udp_start(u)
    assert t.error and u.error


def test_websocket_without_a_decision_is_killed(gw):
    flow = tflow.tflow(ws=True)
    gw.websocket_start(flow)
    assert flow.error
