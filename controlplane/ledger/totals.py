"""Spend totals, always derived from the append-only ledger (so they survive any restart): one
conditional-aggregate statement (controlplane.ledger.sql.spent_totals, plain SQL: it runs on every
allowed request) sums every (scope, unit, window) asked for."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from controlplane.ledger import sql
from controlplane.ledger.models import Cap, Window


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
    starts = [window_start(cap.window, now) for cap in caps]
    terms = [(cap.unit, cap.worker_id or None, None if start is None else sql.adapted_time(start))
             for cap, start in zip(caps, starts, strict=True)]
    # No all-time cap: only the oldest window's lines need reading.
    since = None if None in starts else sql.adapted_time(min(starts))
    return dict(zip((cap.pk for cap in caps), sql.spent_totals(terms, since), strict=True))
