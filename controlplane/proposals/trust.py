"""Earned trust: an admin's rule approves a proposal without a human. Never an identity edit, whatever a
rule says (the model refuses such a rule too; this is the approval path's own check)."""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from controlplane.audit.services import audit_append
from controlplane.ledger.totals import window_start
from controlplane.proposals.models import Proposal, TrustRule


def matching_rule(proposal: Proposal) -> TrustRule | None:
    if proposal.kind == Proposal.Kind.IDENTITY_EDIT or proposal.destination_id is None:
        return None
    now = timezone.now()
    rules = (
        TrustRule.objects.filter(
            enabled=True,
            worker_id=proposal.worker_id,
            destination_id=proposal.destination_id,
            max_per_day__gt=0,
        )
        .filter(Q(kind="") | Q(kind=proposal.kind))
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .order_by("name")
    )
    day = window_start("day", now)
    for rule in rules:
        if rule.kind == Proposal.Kind.IDENTITY_EDIT:  # unreachable by the constraint; never trusted anyway
            continue
        used = Proposal.objects.filter(
            trust_rule=rule, channel=Proposal.Channel.RULE, decided_at__gte=day
        ).count()
        if used < rule.max_per_day:
            return rule
    return None


def apply_earned_trust(proposal: Proposal) -> TrustRule | None:
    """Inside the submission's transaction: approve by the first rule with room today, naming it."""
    if proposal.kind == Proposal.Kind.IDENTITY_EDIT:
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
    audit_append(
        "proposal",
        {
            "proposal": str(proposal.pk),
            "event": "decided",
            "status": "approved",
            "by": f"rule:{rule.name}",
            "rule": rule.name,
            "channel": "rule",
            "at": now.isoformat(),
        },
        run=proposal.run_id,
        worker=proposal.worker.name,
        verdict="approved",
    )
    return rule
