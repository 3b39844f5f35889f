"""Holding a request while its approval is open: long-poll the control plane without blocking the event
loop; approved within the hold → the returned allow; refused → its deny; hold over → approval_expired."""

from __future__ import annotations

import asyncio
import logging

from roster_gateway.client import ControlPlaneClient
from roster_gateway.wire import WireDecision

log = logging.getLogger(__name__)


def _deny(decision: WireDecision, reason: str, message: str) -> WireDecision:
    return WireDecision(verdict="deny", reason=reason, status=403, message=message,
                        decision_id=decision.decision_id, grant=decision.grant)


async def hold_for_approval(client: ControlPlaneClient, decision: WireDecision, *, max_hold: int,
                            poll_seconds: int, background: set) -> WireDecision:
    """Returns an allow or a deny; raises ControlPlaneDown when the control plane fails mid-hold."""
    assert decision.approval_id
    hold = max(0, min(decision.hold_seconds, max_hold))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + hold
    while (remaining := deadline - loop.time()) > 0:
        wait = max(1, min(poll_seconds, int(remaining)))
        try:
            async with asyncio.timeout(remaining):
                answer = await client.wait_approval(decision.approval_id, wait)
        except TimeoutError:
            break
        if answer.status == "approved" and answer.decision is not None:
            return answer.decision
        if answer.status == "refused":
            return answer.decision or _deny(decision, "approval_refused", "an approver refused this request")
        if answer.status == "expired":
            return answer.decision or _deny(decision, "approval_expired", "the approval expired unanswered")
    # The approval stays decidable; the control plane lets the next identical request pass once if
    # it is approved later (grace period), so tell it the request is no longer held.
    task = asyncio.create_task(_abandon(client, decision.approval_id))
    background.add(task)
    task.add_done_callback(background.discard)
    return _deny(decision, "approval_expired",
                 f"no approver answered within {hold}s; if approved later, retry the same request")


async def _abandon(client: ControlPlaneClient, approval_id: str) -> None:
    try:
        await client.abandon(approval_id)
    except Exception as exc:  # noqa: BLE001 - a lost abandon only delays the approval's own expiry
        log.warning("abandon of %s failed: %s", approval_id, exc)
