"""Reads for the pictures that the ledger and the approvals do not own: egress decisions over time,
from the audit chain (decision records carry their verdict and deny reason in indexed columns)."""

from __future__ import annotations

import datetime as dt

from django.db.models import Count, Sum
from django.db.models.functions import TruncDate

from controlplane.audit.models import AuditRecord
from controlplane.core.timebuckets import step_for, truncate
from controlplane.ledger.models import SpendLine

VERDICTS = ("allow", "deny", "ask")


def days_ending(today: dt.date, n: int) -> list[dt.date]:
    return [today - dt.timedelta(days=n - 1 - i) for i in range(n)]


def _decisions(run=None):
    records = AuditRecord.objects.filter(kind="decision")
    return records.filter(run_id_ref=run.pk) if run is not None else records


def decisions_per_day(days: list[dt.date]) -> dict[str, list[int]]:
    """verdict -> decisions on each of `days` (UTC)."""
    series = {verdict: [0] * len(days) for verdict in VERDICTS}
    rows = (_decisions().filter(created_at__date__gte=days[0]).annotate(day=TruncDate("created_at"))
            .values("verdict", "day").annotate(n=Count("id")).order_by())
    for row in rows:
        if row["verdict"] in series and row["day"] in days:
            series[row["verdict"]][days.index(row["day"])] = row["n"]
    return series


def deny_reasons(since: dt.date | None = None, run=None) -> list[tuple[str, int]]:
    """(reason, count) of denied decisions, most frequent first."""
    records = _decisions(run).filter(verdict="deny")
    if since is not None:
        records = records.filter(created_at__date__gte=since)
    rows = records.values("reason").annotate(n=Count("id")).order_by("-n", "reason")
    return [(row["reason"] or "unspecified", row["n"]) for row in rows]


def run_decisions(run, start: dt.datetime, end: dt.datetime) -> dict[str, list[tuple[dt.datetime, int]]]:
    """verdict -> running count of the run's decisions, from (start, 0), one point per time bucket."""
    rows = (_decisions(run).annotate(at=truncate("created_at", step_for(start, end)))
            .values("at", "verdict").annotate(n=Count("id")).order_by("at"))
    series: dict[str, list[tuple[dt.datetime, int]]] = {verdict: [(start, 0)] for verdict in VERDICTS}
    for row in rows:
        points = series.setdefault(row["verdict"], [(start, 0)])
        points.append((max(row["at"], start), points[-1][1] + row["n"]))
    return series


def spend_per_day(days: list[dt.date], unit: str, worker=None) -> dict[str, list[int]]:
    """worker name -> net amount of `unit` spent on each of `days` (UTC)."""
    lines = SpendLine.objects.filter(unit=unit, created_at__date__gte=days[0])
    if worker is not None:
        lines = lines.filter(worker=worker)
    rows = (lines.annotate(day=TruncDate("created_at")).values("worker__name", "day")
            .annotate(total=Sum("amount")).order_by())
    series: dict[str, list[int]] = {}
    for row in rows:
        values = series.setdefault(row["worker__name"], [0] * len(days))
        if row["day"] in days:
            values[days.index(row["day"])] = max(0, int(row["total"] or 0))
    return series
