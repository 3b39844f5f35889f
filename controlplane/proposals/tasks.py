"""Celery tasks on the trusted side: perform approved proposals and expire undecided ones. Tasks take ids
and call services. One attempt per task run; a transient failure schedules the next attempt (bounded by
ROSTER_EXECUTOR_MAX_ATTEMPTS), so no worker thread sleeps between attempts."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from controlplane.proposals import execution, expiry
from controlplane.proposals.executors import Outcome, credential_of, perform

log = logging.getLogger(__name__)


def execute_once(proposal_id: str) -> str:
    """One attempt. Returns the proposal's status afterwards ("skipped" if it was not approved)."""
    proposal = execution.proposal_claim(proposal_id)
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
    record = outcome.as_record(credential)
    if outcome.ok:
        execution.proposal_finished(proposal, record)
        return "executed"
    final = not outcome.transient or proposal.attempts >= settings.ROSTER_EXECUTOR_MAX_ATTEMPTS
    execution.proposal_attempt_failed(proposal, record, final=final)
    return "failed" if final else "retry"


@shared_task(bind=True, max_retries=None, ignore_result=True)
def execute_proposal(self, proposal_id: str) -> str:
    status = execute_once(proposal_id)
    if status == "retry":
        # Bounded by the attempt count on the proposal, not by Celery's counter (which a redelivery resets).
        execute_proposal.apply_async((proposal_id,), countdown=settings.ROSTER_EXECUTOR_RETRY_SECONDS)
    return status


@shared_task(ignore_result=True)
def expire_proposals() -> int:
    return expiry.proposal_expire_due()
