"""Holding a request while its approval is open (approvals.py): approved, refused, expired and abandoned,
capped by the gateway's own hold, and never stalling other flows."""

from __future__ import annotations

import asyncio
import time

from tests.conftest import allow, answer, ask, deny, make_flow, run_request, settle


async def test_ask_then_approved_forwards_with_the_returned_decision(gw, cp):
    cp.decide = ask()
    cp.waits = [{"status": "pending", "decision": None},
                {"status": "approved", "decision": allow(decision_id="dc_ok", inject=[
                    {"header": "authorization", "value": "Bearer REAL"}])}]
    flow = await run_request(gw, make_flow())
    assert flow.response is None
    assert flow.request.headers["authorization"] == "Bearer REAL"
    assert flow.metadata["roster_decision_id"] == "dc_ok"
    assert len(cp.bodies("/wait")) == 2


async def test_ask_then_refused(gw, cp):
    cp.decide = ask()
    cp.waits = [{"status": "refused", "decision": deny("approval_refused")}]
    flow = await run_request(gw, make_flow())
    assert flow.response.status_code == 403 and answer(flow)["reason"] == "approval_refused"


async def test_ask_then_hold_expires_and_abandons(gw, cp):
    cp.decide = ask(hold=1)
    start = time.monotonic()
    flow = await run_request(gw, make_flow())
    assert 0.9 < time.monotonic() - start < 2.0
    assert flow.response.status_code == 403 and answer(flow)["reason"] == "approval_expired"
    await settle(gw)
    assert any(p.endswith("/approvals/ap_1/abandon") for p in cp.paths())


async def test_ask_hold_is_capped_by_the_gateway_option(gw, cp):
    cp.decide = ask(hold=3600)  # the gateway holds at most roster_hold_seconds (2 in these tests)
    start = time.monotonic()
    flow = await run_request(gw, make_flow())
    assert time.monotonic() - start < 3.0
    assert answer(flow)["reason"] == "approval_expired"


async def test_a_held_request_does_not_stall_other_flows(gw, cp):
    def by_path(body):
        return ask(hold=2) if body["path"] == "/slow" else allow()

    cp.decide = by_path
    held = asyncio.create_task(run_request(gw, make_flow(path="/slow")))
    await asyncio.sleep(0.05)
    start = time.monotonic()
    quick = await run_request(gw, make_flow(path="/fast"))
    assert quick.response is None and time.monotonic() - start < 0.2
    assert not held.done()
    held.cancel()
