"""Expiring proposals nobody decided in time (Celery beat, and a decision that arrives too late)."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from controlplane.proposals.changes import announce_after_commit, audit_proposal
from controlplane.proposals.models import Proposal


def proposal_expire(proposal: Proposal) -> bool:
    if not Proposal.objects.filter(pk=proposal.pk, status=Proposal.Status.PENDING).update(
        status=Proposal.Status.EXPIRED
    ):
        return False
    proposal.status = Proposal.Status.EXPIRED
    audit_proposal(proposal, {"event": "expired"}, verdict="expired")
    announce_after_commit(proposal)
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
