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


def _ended(approval: Approval, now: dt.datetime) -> tuple[str, dt.datetime]:
    status = approval.status
    if status in (Approval.Status.APPROVED, Approval.Status.USED, Approval.Status.REFUSED):
        outcome = "refused" if status == Approval.Status.REFUSED else "approved"
        return outcome, approval.decided_at or approval.used_at or now
    if status == Approval.Status.EXPIRED or approval.expires_at <= now:
        return "expired", approval.expires_at
    if approval.abandoned_at is not None:
        return "abandoned", approval.abandoned_at
    return "waiting", now


def held_request_waits(since: dt.datetime, now: dt.datetime | None = None) -> list[Wait]:
    """Every approval created since `since`, oldest first, with how long it waited and how it ended."""
    now = now or timezone.now()
    waits = []
    for approval in (Approval.objects.filter(created_at__gte=since).select_related("run__worker")
                     .order_by("created_at")):
        outcome, ended = _ended(approval, now)
        seconds = max(0.0, (ended - approval.created_at).total_seconds())
        waits.append(Wait(created_at=approval.created_at, seconds=seconds, outcome=outcome,
                          worker=approval.run.worker.name))
    return waits


def summarise(waits: list[Wait]) -> list[WaitSummary]:
    """Per outcome that occurred, in the fixed order of OUTCOMES: count, median and longest wait."""
    out = []
    for outcome in OUTCOMES:
        seconds = [w.seconds for w in waits if w.outcome == outcome]
        if seconds:
            out.append(WaitSummary(outcome, len(seconds), statistics.median(seconds), max(seconds)))
    return out
