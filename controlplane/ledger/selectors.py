"""Reads of cap status: which caps a worker (or the org) has used up, and every cap for the overview."""

from __future__ import annotations

from django.utils import timezone

from controlplane.ledger.models import Cap
from controlplane.ledger.totals import scope_of, spent_for
from controlplane.ledger.types import CapStatus


def _statuses(caps: list[Cap]) -> list[CapStatus]:
    spent = spent_for(caps, timezone.now())
    return [CapStatus(scope=scope_of(c), unit=c.unit, window=c.window, limit=c.limit, spent=spent[c.pk])
            for c in caps]


def exceeded_caps(worker) -> list[CapStatus]:
    """The worker's and the org's caps that are used up (gates proactive dispatch only)."""
    caps = list(Cap.objects.filter(worker__isnull=True).select_related("worker").order_by("id"))
    caps += list(Cap.objects.filter(worker=worker).select_related("worker").order_by("id"))
    return [s for s in _statuses(caps) if s.exhausted]


def cap_statuses() -> list[CapStatus]:
    """Every cap with its current spend, org caps first."""
    caps = list(Cap.objects.select_related("worker").order_by("worker__name", "unit", "window"))
    caps.sort(key=lambda c: c.worker_id is not None)
    return _statuses(caps)
