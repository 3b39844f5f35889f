"""Reads for the approval queue (pending proposals with their previews, the recently settled) and the
earned-trust rule a new proposal meets."""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from controlplane.ledger.totals import window_start
from controlplane.proposals import previews
from controlplane.proposals.models import NO_DESTINATION_KINDS, Proposal, TrustRule
from controlplane.vault.masking import known_sentinels


def _card(proposal: Proposal, sentinels: dict, now) -> dict:
    return {
        "id": str(proposal.pk),
        "status": proposal.status,
        "kind": proposal.kind,
        "worker": proposal.worker.name,
        "run_id": proposal.run_id,
        "destination": proposal.destination.name if proposal.destination_id else "",
        "expires_at": proposal.expires_at,
        "seconds_left": max(0, int((proposal.expires_at - now).total_seconds())),
        "decided_by": proposal.decided_by.get_username() if proposal.decided_by_id else "",
        "rule": proposal.trust_rule.name if proposal.trust_rule_id else "",
        "channel": proposal.channel,
        "reason": proposal.reason,
        "outcome": (proposal.result or {}).get("summary", ""),
        "preview": previews.preview(proposal, sentinels),
    }


def _only(qs, only):
    """The approval queue's filter (controlplane.approvals.cards.QueueFilter): a proposal names its run."""
    return only.apply(qs) if only else qs


def pending_proposal_cards(now=None, only=None) -> list[dict]:
    now = now or timezone.now()
    sentinels = known_sentinels()
    qs = (
        _only(Proposal.objects.filter(status=Proposal.Status.PENDING, expires_at__gt=now), only)
        .select_related("worker", "destination", "decided_by", "trust_rule")
        .order_by("created_at")
    )
    return [_card(p, sentinels, now) for p in qs[:100]]


def recent_proposal_cards(limit: int, now=None, only=None) -> list[dict]:
    now = now or timezone.now()
    qs = (
        _only(Proposal.objects.exclude(status=Proposal.Status.PENDING), only)
        .select_related("worker", "destination", "decided_by", "trust_rule")
        .order_by("-created_at")
    )
    return [
        {
            "id": str(p.pk),
            "kind": p.kind,
            "worker": p.worker.name,
            "run_id": p.run_id,
            "destination": p.destination.name if p.destination_id else "",
            "status": p.status,
            "decided_by": p.decided_by.get_username() if p.decided_by_id else "",
            "rule": p.trust_rule.name if p.trust_rule_id else "",
            "channel": p.channel,
            "outcome": (p.result or {}).get("summary", ""),
            "headline": previews.headline(p),
        }
        for p in qs[:limit]
    ]


def matching_rule(proposal: Proposal) -> TrustRule | None:
    """The first enabled, unexpired earned-trust rule for this proposal's worker, destination and kind
    that has room today; never one for an identity edit."""
    if proposal.kind == Proposal.Kind.IDENTITY_EDIT:
        return None
    if proposal.destination_id is None and proposal.kind not in NO_DESTINATION_KINDS:
        return None
    now = timezone.now()
    if proposal.kind in NO_DESTINATION_KINDS:
        # Only a rule written for this kind, never a destination's rule of "any kind".
        kinds = Q(kind=proposal.kind, destination__isnull=True)
    else:
        kinds = Q(kind="") | Q(kind=proposal.kind)
    rules = (
        TrustRule.objects.filter(
            enabled=True,
            worker_id=proposal.worker_id,
            destination_id=proposal.destination_id,
            max_per_day__gt=0,
        )
        .filter(kinds)
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
