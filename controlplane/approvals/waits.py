"""How long held requests made their box wait (read-only), for the held-request chart (issue 27.1: it used
to count the approval's lifetime, "5 min", for a box the gateway held 60 s).

The box waits from the approval's creation until the first of: the decision, the gateway letting go
(`abandoned_at`), and the end of the gateway's hold (ROSTER_APPROVAL_HOLD_SECONDS, at most the approval's
life: the box was refused `approval_expired` then even if the gateway's report of it is missing). How the
approval ended is the outcome: approved or refused (decided while the box waited, or after it gave up:
then only an identical retry could use it), expired (nobody decided before its expiry), abandoned (the
box stopped waiting and the approval is still pending), or waiting (the box is still held)."""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass

from django.conf import settings
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


def _hold() -> dt.timedelta:
    seconds = min(settings.ROSTER_APPROVAL_HOLD_SECONDS, settings.ROSTER_APPROVAL_TTL_SECONDS)
    return dt.timedelta(seconds=seconds)


def _ended(row: dict, now: dt.datetime) -> tuple[str, dt.datetime]:
    """The outcome, and when the box stopped waiting."""
    status = row["status"]
    box_gone = min(row["abandoned_at"] or row["expires_at"], row["expires_at"], row["created_at"] + _hold())
    if status in (Approval.Status.APPROVED, Approval.Status.USED, Approval.Status.REFUSED):
        outcome = "refused" if status == Approval.Status.REFUSED else "approved"
        return outcome, min(row["decided_at"] or row["used_at"] or now, box_gone)
    if status == Approval.Status.EXPIRED or row["expires_at"] <= now:
        return "expired", box_gone
    if box_gone <= now:
        return "abandoned", box_gone
    return "waiting", now


def held_request_waits(since: dt.datetime, now: dt.datetime | None = None) -> list[Wait]:
    """Every approval created since `since`, oldest first, with how long its box waited and how it ended.
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
