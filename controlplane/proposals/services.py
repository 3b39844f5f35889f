"""Deciding proposals (a human in the web queue or the CLI) and retrying failed ones: the request side.
Expiry is controlplane.proposals.expiry, the executors' side controlplane.proposals.execution. Every
change is audited in the transaction that makes it; executors are enqueued and queue pages told only
after the commit."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from controlplane.approvals import broadcast
from controlplane.core.errors import RosterError
from controlplane.proposals.changes import audit_proposal
from controlplane.proposals.expiry import proposal_expire
from controlplane.proposals.models import Proposal
from controlplane.proposals.tasks import execute_proposal

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
            execute_proposal.delay(proposal_id)

    transaction.on_commit(_go)


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
            proposal_expire(proposal)  # committed below: recorded as an expiry, never as a refusal
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
    audit_proposal(
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
        audit_proposal(proposal, {"event": "retry", "by": user.get_username()}, verdict="approved")
        after_change(proposal)
    return proposal
