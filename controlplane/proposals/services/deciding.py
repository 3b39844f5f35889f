"""Deciding proposals: a person (the web queue or the CLI), an admin's earned-trust rule at intake, a
retry of a failed one, and expiry when nobody decided in time (Celery beat, or a decision too late).
Each change is recorded through controlplane.proposals.services.record in its own transaction."""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from controlplane.core.errors import RosterError
from controlplane.proposals.holds import hold_hits
from controlplane.proposals.models import Proposal, TrustRule
from controlplane.proposals.selectors import matching_rule
from controlplane.proposals.services.record import record

DECIDE_PERMISSION = "approvals.decide_approval"  # the same approvers decide held requests and proposals
MAX_REASON = 2000
HUMAN_CHANNELS = (Proposal.Channel.WEB, Proposal.Channel.CLI, Proposal.Channel.CHAT)


class ProposalClosed(RosterError):
    """The proposal is not in a state that allows this (already decided, expired, executing...)."""


def proposal_decide(proposal_id, user, approve: bool, channel: str, reason: str = "",
                    evidence: dict | None = None) -> Proposal:
    """A person approves or refuses a pending proposal; one that expired meanwhile is recorded as
    expired (never as refused) and the caller told it is closed."""
    if user is None or not user.is_active or not user.has_perm(DECIDE_PERMISSION):
        raise PermissionDenied("you may not decide proposals")
    if channel not in HUMAN_CHANNELS:
        # A rule approves only through approve_by_rule (at intake), never through this path.
        raise ValueError(f"a human decides through web, cli or chat, not {channel!r}")
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
            proposal.status = Proposal.Status.APPROVED if approve else Proposal.Status.REFUSED
            proposal.decided_by, proposal.decided_at = user, now
            proposal.channel, proposal.reason = channel, reason.strip()
            proposal.save(update_fields=["status", "decided_by", "decided_at", "channel", "reason"])
            record(proposal, "decided", status=proposal.status, by=user.get_username(), channel=channel,
                   reason=proposal.reason, at=now.isoformat(), **({"evidence": evidence} if evidence else {}))
    if expired:
        raise ProposalClosed(f"proposal {proposal_id} expired at {proposal.expires_at.isoformat()}")
    return proposal


def approve_by_rule(proposal: Proposal) -> TrustRule | None:
    """Inside the submission's transaction: approve by the first rule with room today, naming it. Never
    an identity edit, whatever a rule says (the model refuses such a rule too; this is the approval
    path's own check)."""
    if proposal.kind == Proposal.Kind.IDENTITY_EDIT:
        return None
    if proposal.untrusted:
        # The untrusted flag acts (invariant 1): a run that received untrusted content earns no trust;
        # its proposals wait for a person whatever a rule says.
        return None
    hits = hold_hits(proposal)
    if hits:
        # A tripwire found something (the participant scan): a person decides, seeing the hits.
        proposal.held = hits[:50]
        proposal.save(update_fields=["held"])
        record(proposal, "held", hits=proposal.held)
        return None
    rule = matching_rule(proposal)
    if rule is None:
        return None
    now = timezone.now()
    proposal.status = Proposal.Status.APPROVED
    proposal.channel = Proposal.Channel.RULE
    proposal.trust_rule = rule
    proposal.decided_at = now
    proposal.save(update_fields=["status", "channel", "trust_rule", "decided_at"])
    record(proposal, "decided", status=proposal.status, by=f"rule:{rule.name}", rule=rule.name,
           channel=Proposal.Channel.RULE, at=now.isoformat())
    return rule


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
        record(proposal, "retry", by=user.get_username())
    return proposal


def proposal_expire(proposal: Proposal) -> bool:
    """pending -> expired, once (a conditional UPDATE). Call inside a transaction."""
    if not Proposal.objects.filter(pk=proposal.pk, status=Proposal.Status.PENDING).update(
        status=Proposal.Status.EXPIRED
    ):
        return False
    proposal.status = Proposal.Status.EXPIRED
    record(proposal, "expired")
    return True


def proposal_expire_due(now: datetime | None = None) -> int:
    now = now or timezone.now()
    count = 0
    with transaction.atomic():
        for proposal in Proposal.objects.select_related("worker").filter(
            status=Proposal.Status.PENDING, expires_at__lte=now
        ):
            count += proposal_expire(proposal)
    return count
