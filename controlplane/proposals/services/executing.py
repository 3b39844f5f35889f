"""Performing an approved proposal (the executors' side, run by controlplane.proposals.tasks): claim it
once, perform it, then record the attempt that failed or the one that succeeded. Each change is recorded
through controlplane.proposals.services.record in its own transaction."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.proposals.executors import Outcome, credential_of, perform
from controlplane.proposals.models import Proposal
from controlplane.proposals.services.record import record

log = logging.getLogger(__name__)


def execute_once(proposal_id: str) -> str:
    """One attempt. Returns the proposal's status afterwards: "executed", "failed", "retry" (a transient
    failure with attempts left), or "skipped" (it was not approved, or another executor has it)."""
    proposal = proposal_claim(proposal_id)
    if proposal is None:
        return "skipped"
    credential = None
    try:
        if proposal.destination_id and not proposal.destination.enabled:
            # An admin switched the destination off after the approval: nothing goes there any more.
            outcome = Outcome(ok=False, transient=False, summary="destination disabled")
        else:
            credential = credential_of(proposal.destination)
            outcome = perform(proposal, credential)
    except Exception as exc:  # noqa: BLE001 - recorded as a failure; the message is the type only
        log.warning("executor for proposal %s raised %s", proposal_id, type(exc).__name__)
        outcome = Outcome(ok=False, transient=False, summary="executor error", detail=type(exc).__name__)
    answer = outcome.as_record(credential)
    if outcome.ok:
        proposal_finished(proposal, answer)
        return "executed"
    final = not outcome.transient or proposal.attempts >= settings.ROSTER_EXECUTOR_MAX_ATTEMPTS
    proposal_attempt_failed(proposal, answer, final=final)
    return "failed" if final else "retry"


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
        record(proposal, "executing", attempt=proposal.attempts)
    return proposal


def proposal_attempt_failed(proposal: Proposal, answer: dict, *, final: bool) -> None:
    """A transient failure: back to approved for the next attempt, or failed when attempts are spent."""
    with transaction.atomic():
        status = Proposal.Status.FAILED if final else Proposal.Status.APPROVED
        Proposal.objects.filter(pk=proposal.pk, status=Proposal.Status.EXECUTING).update(
            status=status, result=answer
        )
        proposal.status, proposal.result = status, answer
        record(proposal, "failed" if final else "attempt_failed", attempt=proposal.attempts, answer=answer)


def proposal_finished(proposal: Proposal, answer: dict) -> None:
    with transaction.atomic():
        now = timezone.now()
        Proposal.objects.filter(pk=proposal.pk, status=Proposal.Status.EXECUTING).update(
            status=Proposal.Status.EXECUTED, result=answer, executed_at=now
        )
        proposal.status, proposal.result = Proposal.Status.EXECUTED, answer
        record(proposal, "executed", attempt=proposal.attempts, answer=answer)
