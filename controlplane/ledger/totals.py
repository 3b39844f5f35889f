"""Spend totals, always derived from the append-only ledger (so they survive any restart): one
conditional-aggregate query sums every (scope, unit, window) asked for."""

from __future__ import annotations

import datetime as dt

from django.db.models import Q, Sum
from django.utils import timezone

from controlplane.ledger.models import Cap, SpendLine, Window


def window_start(window: str, now: dt.datetime) -> dt.datetime | None:
    """Windows are calendar day / month in UTC; "all" has no start."""
    now = now.astimezone(dt.UTC)
    if window == Window.DAY:
        return now.replace(hour=0, minute=0, second=0, microsecond=0)
    if window == Window.MONTH:
        return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if window == Window.ALL:
        return None
    raise ValueError(f"unknown window {window!r}")


def scope_of(cap: Cap) -> str:
    return f"worker:{cap.worker.name}" if cap.worker_id else "org"


def spent_for(caps: list[Cap], now: dt.datetime | None = None) -> dict[int, int]:
    """Cap id -> amount spent in that cap's scope, unit and current window."""
    if not caps:
        return {}
    now = now or timezone.now()
    sums, starts = {}, []
    for cap in caps:
        cond = Q(unit=cap.unit)
        if cap.worker_id:
            cond &= Q(worker_id=cap.worker_id)
        start = window_start(cap.window, now)
        starts.append(start)
        if start is not None:
            cond &= Q(created_at__gte=start)
        sums[f"c{cap.pk}"] = Sum("amount", filter=cond, default=0)
    lines = SpendLine.objects.filter(unit__in={c.unit for c in caps})
    if None not in starts:  # no all-time cap: only the oldest window's lines need reading
        lines = lines.filter(created_at__gte=min(starts))
    row = lines.aggregate(**sums)
    return {cap.pk: int(row[f"c{cap.pk}"]) for cap in caps}
