"""Outcome reports (outcomes.py): batched in the background, one batch in flight, never waited for."""

from __future__ import annotations

import asyncio
import time

from tests.conftest import allow, make_flow, reported, run_request, settle


async def test_next_decision_of_a_run_does_not_wait_for_its_outcome(gw, cp):
    """The control plane raises taint when it allows, so a slow outcome holds nothing up."""
    from mitmproxy.test import tutils

    order: list[str] = []
    real_handle = cp.handle

    async def handle(method, path, body):
        if path.endswith("/outcomes"):
            await asyncio.sleep(0.3)
        order.append(path.rsplit("/", 1)[-1])
        return await real_handle(method, path, body)

    cp.handle = handle
    first = await run_request(gw, make_flow())
    first.response = tutils.tresp()
    gw.response(first)
    start = time.monotonic()
    second = await run_request(gw, make_flow())
    assert second.response is None and time.monotonic() - start < 0.25
    await settle(gw)
    assert [p for p in order if p != "sentinels"] == ["decide", "decide", "outcomes"]


async def test_outcomes_are_batched_one_request_in_flight(gw, cp):
    from mitmproxy.test import tutils

    in_flight = peak = 0
    real_handle = cp.handle

    async def handle(method, path, body):
        nonlocal in_flight, peak
        if path.endswith("/outcomes"):
            cp.calls.append((path, body))
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.05)
            in_flight -= 1
            return 200, {"results": ["ok"] * len(body["outcomes"])}
        return await real_handle(method, path, body)

    cp.handle = handle
    for i in range(5):
        cp.decide = allow(decision_id=f"dc_{i}")
        flow = await run_request(gw, make_flow())
        flow.response = tutils.tresp()
        gw.response(flow)
    await settle(gw)
    assert [o["decision_id"] for o in reported(cp)] == [f"dc_{i}" for i in range(5)]
    assert len(cp.bodies("/outcomes")) == 1 and peak == 1


async def test_outcome_batches_respect_the_maximum(gw, cp):
    gw.tctx.configure(gw, roster_outcome_batch_max=2)
    for i in range(5):
        gw.steps.report(f"dc_{i}", 200, 1, 1, "")
    await settle(gw)
    assert [len(b["outcomes"]) for b in cp.bodies("/outcomes")] == [2, 2, 1]
    assert [o["decision_id"] for o in reported(cp)] == [f"dc_{i}" for i in range(5)]


async def test_outcome_report_failure_is_logged_not_raised(gw, cp, caplog):
    cp.fail_status = 500
    gw.steps.report("dc_lost", 200, 1, 1, "")
    await settle(gw)
    assert "1 outcome(s) not reported" in caplog.text
    cp.fail_status = None
    gw.steps.report("dc_next", 200, 1, 1, "")  # the reporter carries on after a failure
    await settle(gw)
    assert reported(cp)[-1]["decision_id"] == "dc_next"
