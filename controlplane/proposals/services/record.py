"""The one way a proposal's change is recorded. Call `record` inside the change's own transaction, after
saving it: the audit record is appended in that transaction, and after the commit the live queue pages
are told that something changed and, when the change approved the proposal (a person, a rule, a retry),
its executor is started. A proposal the box was refused never existed: `record_refusal` audits it."""

from __future__ import annotations

import hashlib

from celery import current_app
from django.db import transaction

from controlplane.approvals import broadcast
from controlplane.audit.services import audit_append
from controlplane.proposals.models import Proposal

_STATUS = object()  # the verdict column is the status the change left the proposal in
# Every event a proposal's record can carry, and its verdict: the intake waits for a decision ("ask"), the
# executor's in-between steps settle nothing.
EVENTS = {
    "proposed": "ask",
    "held": "ask",
    "decided": _STATUS,
    "retry": _STATUS,
    "executing": "",
    "attempt_failed": "",
    "failed": _STATUS,
    "executed": _STATUS,
    "expired": _STATUS,
}
# The executor's Celery task, started by name: the tasks module calls these services, so this module may not
# import it (no import circles). controlplane.proposals.apps loads the tasks module in every process, so the
# name resolves to the task itself (run at once where tasks are eager); without it, it goes to the broker.
EXECUTE_TASK = "controlplane.proposals.tasks.execute_proposal"
# The events after which an approved proposal goes to its executor. A failed attempt that is tried again
# is not one: the executor's task schedules its own next attempt (controlplane.proposals.tasks).
_STARTS_EXECUTOR = frozenset({"decided", "retry"})


def record(proposal: Proposal, event: str, **data) -> None:
    if event not in EVENTS:
        raise ValueError(f"unknown proposal event {event!r}")
    verdict = proposal.status if EVENTS[event] is _STATUS else EVENTS[event]
    audit_append("proposal", {"proposal": str(proposal.pk), "event": event, **data},
                 run=proposal.run_id, worker=proposal.worker.name, verdict=verdict)
    proposal_id, status = str(proposal.pk), proposal.status
    start = event in _STARTS_EXECUTOR and status == Proposal.Status.APPROVED
    transaction.on_commit(lambda: _after_commit(proposal_id, status, start))


def _after_commit(proposal_id: str, status: str, start: bool) -> None:
    broadcast.approval_changed(proposal_id, status)
    if start:
        current_app.signature(EXECUTE_TASK, args=(proposal_id,)).delay()


def record_refusal(run, raw: bytes, reason: str, message: str, kind: str = "", destination: str = "") -> None:
    """A submission refused before anything was stored: what it was (size and digest, never its bytes)
    and why."""
    audit_append(
        "proposal",
        {"event": "rejected", "reason": reason, "message": message[:500], "kind": kind,
         "destination": destination, "body_size": len(raw), "body_sha256": hashlib.sha256(raw).hexdigest()},
        run=run, verdict="deny", reason=reason,
    )
