"""Deciding proposals (a human in the web queue or the CLI), expiring the undecided ones, and the
executors' state changes. Every change is audited in the transaction that makes it; executors are
enqueued and queue pages told only after the commit."""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from controlplane.approvals import broadcast
from controlplane.audit.services import audit_append
from controlplane.core.errors import RosterError
from controlplane.proposals.models import Proposal

DECIDE_PERMISSION = "approvals.decide_approval"  # the same approvers decide held requests and proposals
MAX_REASON = 2000
HUMAN_CHANNELS = (Proposal.Channel.WEB, Proposal.Channel.CLI)


class ProposalClosed(RosterError):
    """The proposal is not in a state that allows this (already decided, expired, executing...)."""


def after_change(proposal: Proposal) -> None:
    """Call inside the transaction: after commit, tell the queue and, once approved, start the executor."""
    proposal_id, status = str(proposal.pk), proposal.status

    def _go():
        broadcast.approval_changed(proposal_id, status)
        if status == Proposal.Status.APPROVED:
            from controlplane.proposals.tasks import execute_proposal

            execute_proposal.delay(proposal_id)

    transaction.on_commit(_go)


def _audit(proposal: Proposal, data: dict, verdict: str = "") -> None:
    audit_append(
        "proposal",
        {"proposal": str(proposal.pk), **data},
        run=proposal.run_id,
        worker=proposal.worker.name,
        verdict=verdict,
    )


def proposal_decide(proposal_id, user, approve: bool, channel: str, reason: str = "") -> Proposal:
    if user is None or not user.is_active or not user.has_perm(DECIDE_PERMISSION):
        raise PermissionDenied("you may not decide proposals")
    if channel not in HUMAN_CHANNELS:
        # A rule approves only through controlplane.proposals.trust, never through this path.
        raise ValueError(f"a human decides through web or cli, not {channel!r}")
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        raise ValueError(f"a reason is text of at most {MAX_REASON} characters")
    now = timezone.now()
    with transaction.atomic():
        proposal = Proposal.objects.select_for_update().select_related("worker").get(pk=proposal_id)
        if proposal.status != Proposal.Status.PENDING:
            raise ProposalClosed(f"proposal {proposal_id} is already {proposal.status}")
        expired = proposal.expires_at <= now
        if expired:
            _expire(proposal)  # committed below: recorded as an expiry, never as a refusal
        else:
            _record_decision(proposal, user, approve, channel, reason, now)
    if expired:
        raise ProposalClosed(f"proposal {proposal_id} expired at {proposal.expires_at.isoformat()}")
    return proposal


def _record_decision(proposal: Proposal, user, approve: bool, channel: str, reason: str, now) -> None:
    proposal.status = Proposal.Status.APPROVED if approve else Proposal.Status.REFUSED
    proposal.decided_by, proposal.decided_at = user, now
    proposal.channel, proposal.reason = channel, reason.strip()
    proposal.save(update_fields=["status", "decided_by", "decided_at", "channel", "reason"])
    _audit(
        proposal,
        {
            "event": "decided",
            "status": proposal.status,
            "by": user.get_username(),
            "channel": channel,
            "reason": proposal.reason,
            "at": now.isoformat(),
        },
        verdict=proposal.status,
    )
    after_change(proposal)


def _expire(proposal: Proposal) -> bool:
    if not Proposal.objects.filter(pk=proposal.pk, status=Proposal.Status.PENDING).update(
        status=Proposal.Status.EXPIRED
    ):
        return False
    proposal.status = Proposal.Status.EXPIRED
    _audit(proposal, {"event": "expired"}, verdict="expired")
    after_change(proposal)
    return True


def proposal_expire_due(now: datetime | None = None) -> int:
    now = now or timezone.now()
    count = 0
    with transaction.atomic():
        for proposal in Proposal.objects.select_related("worker").filter(
            status=Proposal.Status.PENDING, expires_at__lte=now
        ):
            count += _expire(proposal)
    return count


def proposal_retry(proposal_id, user) -> Proposal:
    """A human sends a failed proposal to its executor again (same idempotency key: the remote can tell)."""
    if user is None or not user.is_active or not user.has_perm(DECIDE_PERMISSION):
        raise PermissionDenied("you may not retry proposals")
    with transaction.atomic():
        proposal = Proposal.objects.select_for_update().select_related("worker").get(pk=proposal_id)
        if proposal.status != Proposal.Status.FAILED:
            raise ProposalClosed(f"only a failed proposal can be retried; {proposal_id} is {proposal.status}")
        proposal.status, proposal.attempts = Proposal.Status.APPROVED, 0
        proposal.save(update_fields=["status", "attempts"])
        _audit(proposal, {"event": "retry", "by": user.get_username()}, verdict="approved")
        after_change(proposal)
    return proposal


# --- executor state changes (controlplane.proposals.tasks) ---


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
        _audit(proposal, {"event": "executing", "attempt": proposal.attempts})
    return proposal


def proposal_attempt_failed(proposal: Proposal, answer: dict, *, final: bool) -> None:
    """A transient failure: back to approved for the next attempt, or failed when attempts are spent."""
    with transaction.atomic():
        status = Proposal.Status.FAILED if final else Proposal.Status.APPROVED
        Proposal.objects.filter(pk=proposal.pk, status=Proposal.Status.EXECUTING).update(
            status=status, result=answer
        )
        proposal.status, proposal.result = status, answer
        _audit(
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
        _audit(
            proposal,
            {"event": "executed", "attempt": proposal.attempts, "answer": answer},
            verdict="executed",
        )
        transaction.on_commit(lambda: broadcast.approval_changed(str(proposal.pk), Proposal.Status.EXECUTED))
