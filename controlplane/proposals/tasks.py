"""Celery tasks on the trusted side: perform approved proposals and expire undecided ones. Tasks take ids
and call services. One attempt per task run; a transient failure schedules the next attempt (bounded by
ROSTER_EXECUTOR_MAX_ATTEMPTS), so no worker thread sleeps between attempts."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from controlplane.proposals.services import deciding, executing
from controlplane.proposals.services.record import EXECUTE_TASK


@shared_task(name=EXECUTE_TASK, bind=True, max_retries=None, ignore_result=True)
def execute_proposal(self, proposal_id: str) -> str:
    status = executing.execute_once(proposal_id)
    if status == "retry":
        # Bounded by the attempt count on the proposal, not by Celery's counter (which a redelivery resets).
        execute_proposal.apply_async((proposal_id,), countdown=settings.ROSTER_EXECUTOR_RETRY_SECONDS)
    return status


@shared_task(ignore_result=True)
def expire_proposals() -> int:
    return deciding.proposal_expire_due()
