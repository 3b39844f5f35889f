"""Time buckets for pictures over time: the finest calendar step that keeps a span under a bucket
budget, and the database function that truncates a timestamp to it (in UTC, like every window)."""

from __future__ import annotations

import datetime as dt

from django.db.models.functions import TruncDay, TruncHour, TruncMinute, TruncMonth, TruncSecond

# (step, its length, truncation): finest first. A month is taken as 31 days, so it never undercounts.
STEPS = [("second", dt.timedelta(seconds=1), TruncSecond), ("minute", dt.timedelta(minutes=1), TruncMinute),
         ("hour", dt.timedelta(hours=1), TruncHour), ("day", dt.timedelta(days=1), TruncDay),
         ("month", dt.timedelta(days=31), TruncMonth)]
MAX_BUCKETS = 240


def step_for(start: dt.datetime, end: dt.datetime, max_buckets: int = MAX_BUCKETS) -> str:
    """The finest step for which [start, end] spans at most max_buckets buckets."""
    span = max(end - start, dt.timedelta(0))
    for name, length, _ in STEPS:
        if span / length <= max_buckets:
            return name
    return STEPS[-1][0]


def truncate(field: str, step: str):
    """The ORM expression truncating `field` to `step` in UTC."""
    for name, _, trunc in STEPS:
        if name == step:
            return trunc(field, tzinfo=dt.UTC)
    raise ValueError(f"unknown step {step!r}")
