"""How long held requests waited for a person (read-only). A wait runs from the approval's creation to
its decision; an expired one ends at its expiry (it is expired then even if the sweep has not marked it
yet); a pending one whose box stopped waiting ends when the gateway let go ("abandoned"); a pending one
still held has waited until now so far ("waiting")."""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass

from django.utils import timezone

from controlplane.approvals.models import Approval

OUTCOMES = ("approved", "refused", "expired", "abandoned", "waiting")


@dataclass(frozen=True)
class Wait:
    created_at: dt.datetime
    seconds: float
    outcome: str
    worker: str


@dataclass(frozen=True)
class WaitSummary:
    outcome: str
    count: int
    median_seconds: float
    longest_seconds: float


_FIELDS = ("created_at", "status", "decided_at", "used_at", "expires_at", "abandoned_at", "run__worker__name")


def _ended(row: dict, now: dt.datetime) -> tuple[str, dt.datetime]:
    status = row["status"]
    if status in (Approval.Status.APPROVED, Approval.Status.USED, Approval.Status.REFUSED):
        outcome = "refused" if status == Approval.Status.REFUSED else "approved"
        return outcome, row["decided_at"] or row["used_at"] or now
    if status == Approval.Status.EXPIRED or row["expires_at"] <= now:
        return "expired", row["expires_at"]
    if row["abandoned_at"] is not None:
        return "abandoned", row["abandoned_at"]
    return "waiting", now


def held_request_waits(since: dt.datetime, now: dt.datetime | None = None) -> list[Wait]:
    """Every approval created since `since`, oldest first, with how long it waited and how it ended.
    Plain rows, not model instances: a busy fortnight holds many approvals."""
    now = now or timezone.now()
    waits = []
    for row in Approval.objects.filter(created_at__gte=since).order_by("created_at").values(*_FIELDS):
        outcome, ended = _ended(row, now)
        seconds = max(0.0, (ended - row["created_at"]).total_seconds())
        waits.append(Wait(created_at=row["created_at"], seconds=seconds, outcome=outcome,
                          worker=row["run__worker__name"]))
    return waits


def summarise(waits: list[Wait]) -> list[WaitSummary]:
    """Per outcome that occurred, in the fixed order of OUTCOMES: count, median and longest wait."""
    out = []
    for outcome in OUTCOMES:
        seconds = [w.seconds for w in waits if w.outcome == outcome]
        if seconds:
            out.append(WaitSummary(outcome, len(seconds), statistics.median(seconds), max(seconds)))
    return out
