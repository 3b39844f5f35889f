"""/decide's deadline is the decide timeout plus the budget wait the control plane may take
(roster_budget_wait_ms, at least its ROSTER_BUDGET_WAIT_MS): a call kept waiting for budget that calls in
flight hold is answered, not cut off as a 503; past both, it is a deny as before."""

from __future__ import annotations

import asyncio
import json

import pytest
from roster_gateway.client import ControlPlaneClient, ControlPlaneDown

from tests.conftest import allow


class SlowDecide:
    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def request(self, method, path, body=None):
        await asyncio.sleep(self.delay)
        return 200, json.dumps(allow()).encode()

    async def close(self) -> None:
        pass


async def test_a_decide_kept_waiting_for_budget_is_answered_within_timeout_plus_wait():
    client = ControlPlaneClient("http://cp", "svc", decide_timeout=0.1, outcome_timeout=0.1, decide_wait=0.5,
                                transport=SlowDecide(0.3))
    decision = await client.decide({})
    assert decision.verdict == "allow"


@pytest.mark.parametrize("wait", [0, 0.1])
async def test_past_the_timeout_plus_the_wait_it_is_control_plane_down(wait):
    client = ControlPlaneClient("http://cp", "svc", decide_timeout=0.1, outcome_timeout=0.1, decide_wait=wait,
                                transport=SlowDecide(0.4))
    with pytest.raises(ControlPlaneDown):
        await client.decide({})
