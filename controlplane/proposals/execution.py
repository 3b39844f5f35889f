"""The executors' state changes (controlplane.proposals.tasks, the worker side): claim an approved
proposal once, then record an attempt that failed or the one that succeeded. Each change is audited in
its own transaction; the queue pages are told after the commit."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from controlplane.approvals import broadcast
from controlplane.proposals.changes import audit_proposal
from controlplane.proposals.models import Proposal


def proposal_claim(proposal_id) -> Proposal | None:
    """approved -> executing, at most once per approval (a conditional UPDATE): of two executors, or a
    redelivered task, one wins; an executed proposal is never claimed again."""
    with transaction.atomic():
        claimed = Proposal.objects.filter(pk=proposal_id, status=Proposal.Status.APPROVED).update(
            status=Proposal.Status.EXECUTING
        )
        if not claimed:
            return None
        proposal = Proposal.objects.select_related("worker", "destination__secret").get(pk=proposal_id)
        proposal.attempts += 1
        proposal.save(update_fields=["attempts"])
        audit_proposal(proposal, {"event": "executing", "attempt": proposal.attempts})
    return proposal


def proposal_attempt_failed(proposal: Proposal, answer: dict, *, final: bool) -> None:
    """A transient failure: back to approved for the next attempt, or failed when attempts are spent."""
    with transaction.atomic():
        status = Proposal.Status.FAILED if final else Proposal.Status.APPROVED
        Proposal.objects.filter(pk=proposal.pk, status=Proposal.Status.EXECUTING).update(
            status=status, result=answer
        )
        proposal.status, proposal.result = status, answer
        audit_proposal(
            proposal,
            {
                "event": "failed" if final else "attempt_failed",
                "attempt": proposal.attempts,
                "answer": answer,
            },
            verdict="failed" if final else "",
        )
        if final:
            transaction.on_commit(lambda: broadcast.approval_changed(str(proposal.pk), status))


def proposal_finished(proposal: Proposal, answer: dict) -> None:
    with transaction.atomic():
        now = timezone.now()
        Proposal.objects.filter(pk=proposal.pk, status=Proposal.Status.EXECUTING).update(
            status=Proposal.Status.EXECUTED, result=answer, executed_at=now
        )
        proposal.status, proposal.result = Proposal.Status.EXECUTED, answer
        audit_proposal(
            proposal,
            {"event": "executed", "attempt": proposal.attempts, "answer": answer},
            verdict="executed",
        )
        transaction.on_commit(lambda: broadcast.approval_changed(str(proposal.pk), Proposal.Status.EXECUTED))
