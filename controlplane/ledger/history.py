"""Spend over time, read from the append-only ledger (nothing here writes): how a cap's spend
accumulated over its current window, and a run's spend by unit over its life. Lines are summed per
time bucket in the database, so a long window costs one grouped query, not one row per line."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import Sum
from django.utils import timezone

from controlplane.core.timebuckets import step_for, truncate
from controlplane.ledger.models import Cap, SpendLine, Unit
from controlplane.ledger.totals import scope_of, window_start

Points = list[tuple[dt.datetime, int]]


@dataclass(frozen=True)
class CapHistory:
    """A cap's running total over its window: `points` starts at (start, 0) and each later point is the
    total after that bucket, so the last one is what the cap has spent (the same sum the gate reads)."""

    cap_id: int
    scope: str
    unit: str
    window: str
    limit: int
    start: dt.datetime
    end: dt.datetime
    points: Points

    @property
    def spent(self) -> int:
        return self.points[-1][1]

    @property
    def has_spend(self) -> bool:
        return len(self.points) > 1


@dataclass(frozen=True)
class RunSpend:
    """One unit of a run's spend: what its requests reserved, and the net after settles and releases."""

    unit: str
    reserved: Points
    net: Points


def _running(start: dt.datetime, rows) -> Points:
    points, total = [(start, 0)], 0
    for at, amount in rows:
        total += int(amount or 0)
        points.append((max(at, start), total))
    return points


def cap_history(cap: Cap, now: dt.datetime | None = None) -> CapHistory:
    now = now or timezone.now()
    lines = SpendLine.objects.filter(unit=cap.unit)
    if cap.worker_id:
        lines = lines.filter(worker_id=cap.worker_id)
    start = window_start(cap.window, now)
    if start is None:  # all time: the picture begins with the first line
        start = lines.order_by("created_at").values_list("created_at", flat=True).first() or now
    else:
        lines = lines.filter(created_at__gte=start)
    rows = (lines.annotate(at=truncate("created_at", step_for(start, now))).values("at")
            .annotate(total=Sum("amount")).order_by("at").values_list("at", "total"))
    points = _running(start, rows)
    return CapHistory(cap_id=cap.pk, scope=scope_of(cap), unit=cap.unit, window=cap.window, limit=cap.limit,
                      start=start, end=max(now, points[-1][0]), points=points)


def cap_histories(worker=None, now: dt.datetime | None = None) -> list[CapHistory]:
    """The org's caps (worker None) or one worker's caps, each with its window's running total."""
    caps = Cap.objects.select_related("worker").order_by("unit", "window", "id")
    caps = caps.filter(worker=worker) if worker is not None else caps.filter(worker__isnull=True)
    now = now or timezone.now()
    return [cap_history(cap, now) for cap in caps]


def run_spend(run, now: dt.datetime | None = None) -> tuple[dt.datetime, dt.datetime, list[RunSpend]]:
    """(start, end, per unit in the ledger's unit order) for one run, from its creation to its end (or
    now, or its last line if a settle came after the end)."""
    start = run.created_at
    end = run.ended_at or now or timezone.now()
    lines = SpendLine.objects.filter(run=run)
    last = lines.order_by("-created_at").values_list("created_at", flat=True).first()
    if last is not None and last > end:
        end = last
    rows = (lines.annotate(at=truncate("created_at", step_for(start, end))).values("at", "unit", "kind")
            .annotate(total=Sum("amount")).order_by("at"))
    by_unit: dict[str, dict[str, list]] = {}
    for row in rows:
        series = by_unit.setdefault(row["unit"], {"reserved": [], "net": []})
        if row["kind"] == SpendLine.Kind.RESERVE:
            series["reserved"].append((row["at"], row["total"]))
        series["net"].append((row["at"], row["total"]))
    units = [u for u in Unit.values if u in by_unit]
    return start, end, [RunSpend(unit=u, reserved=_merge(_running(start, by_unit[u]["reserved"])),
                                 net=_merge(_running(start, by_unit[u]["net"]))) for u in units]


def _merge(points: Points) -> Points:
    """One point per instant (several kinds share a bucket): the last total at that instant wins. The
    first point, (start, 0), stays: the picture always rises from zero."""
    merged: dict[dt.datetime, int] = {}
    for at, total in points[1:]:
        merged[at] = total
    return points[:1] + list(merged.items())
