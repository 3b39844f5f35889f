"""The gateway reports the peer address of the box connection with every call that carries the run token
(/decide, /proposals, a proposal's status): the control plane accepts a token only from its run's box."""

from __future__ import annotations

import pytest
from roster_gateway.facts import client_address

from tests.conftest import deny, make_flow, run_request
from tests.test_proposals import UUID, propose_flow, send


def _from(address, port=40000, **kw):
    flow = make_flow(**kw)
    flow.client_conn.peername = (address, port) if address is not None else None
    return flow


async def test_decide_carries_the_box_connections_peer_address(gw, cp):
    await run_request(gw, _from("10.89.0.7"))
    [sent] = cp.bodies("/decide")
    assert sent["client"] == "10.89.0.7" and sent["token"] == "rt_good"


async def test_an_ipv4_mapped_peer_is_sent_as_ipv4(gw, cp):
    await run_request(gw, _from("::ffff:10.89.0.7"))
    assert cp.bodies("/decide")[0]["client"] == "10.89.0.7"


async def test_no_peer_address_is_sent_as_empty_and_the_control_plane_refuses_it(gw, cp):
    cp.decide = deny("bad_token", 407)
    flow = await run_request(gw, _from(None))
    assert cp.bodies("/decide")[0]["client"] == ""
    assert flow.response.status_code == 407


async def test_a_tunnels_decide_carries_it_too(gw, cp):
    flow = _from("10.89.0.8", method="CONNECT", host="pinned.example.com", port=8443)
    await gw.http_connect(flow)
    assert cp.bodies("/decide")[0]["client"] == "10.89.0.8"


async def test_proposals_and_their_status_carry_it(gw, cp):
    flow = propose_flow({"kind": "webhook", "destination": "hooks", "payload": {}})
    flow.client_conn.peername = ("10.89.0.9", 5555)
    await send(gw, flow)
    status = make_flow(host="proposals.roster.invalid", path=f"/v1/proposals/{UUID}")
    status.client_conn.peername = ("10.89.0.9", 5556)
    await send(gw, status)
    assert cp.bodies("/proposals")[0]["client"] == "10.89.0.9"
    assert cp.bodies("/status")[0]["client"] == "10.89.0.9"


@pytest.mark.parametrize(("peer", "sent"), [
    (("10.0.0.1", 1), "10.0.0.1"), (("fd00::1", 1, 0, 0), "fd00::1"), (("::ffff:10.0.0.1", 1), "10.0.0.1"),
    (None, ""), (("not an address", 1), ""), ((), ""),
])
def test_client_address_forms(peer, sent):
    flow = make_flow()
    flow.client_conn.peername = peer
    assert client_address(flow) == sent
