"""The overview's and the worker page's pictures: spend and decisions per day, each cap's spend over
its current window with the cap drawn, and how long held requests waited for a person."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from controlplane.approvals.waits import held_request_waits, summarise
from controlplane.ledger.history import CapHistory, cap_histories
from controlplane.ledger.models import Cap
from controlplane.web.charts import data
from controlplane.web.charts.labels import (
    COLOURS,
    OUTCOME_COLOURS,
    PERIODS,
    VERDICT_COLOURS,
    amount,
    scope_words,
    unit_words,
)
from controlplane.web.charts.svg import Axis, Chart, Dot, Limit, Line, duration, no_data, time_chart

MAX_DOTS = 500  # beyond this a dot plot is ink, not information; the summary still counts every wait


def _midnights(days: list[dt.date]) -> list[dt.datetime]:
    return [dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC) for day in days]


def spend_chart(unit: str = "requests", days: int = 14, worker=None, chart_id: str = "spend-chart") -> Chart:
    """Net spend per day and worker; the org's (or the worker's) daily cap of that unit drawn."""
    span = data.days_ending(timezone.now().date(), days)
    at = _midnights(span)
    series = data.spend_per_day(span, unit, worker)
    cap = Cap.objects.filter(unit=unit, window="day", worker=worker).first()
    title = f"{unit_words(unit).capitalize()} spent per day, last {days} days" + (
        f", worker {worker.name}" if worker else "")
    limit = Limit(cap.limit, f"cap {amount(cap.limit, unit)} per day") if cap else None
    total = sum(sum(values) for values in series.values())
    if not series:
        return Chart(chart_id, title, no_data(f"No {unit_words(unit)} spent in the last {days} days: "
                                              "no data yet."), "Nothing spent yet.", empty=True)
    lines = [Line(name, list(zip(at, values, strict=True)), COLOURS[i % len(COLOURS)])
             for i, (name, values) in enumerate(sorted(series.items()))]
    summary = (f"{amount(total, unit)} spent in the last {days} days by {len(series)} worker"
               f"{'s' if len(series) != 1 else ''}; today {amount(sum(v[-1] for v in series.values()), unit)}"
               + (f" of a daily cap of {cap.limit:,}." if cap else "."))
    desc = f"One line per worker, one point per day (UTC). {summary}"
    return Chart(chart_id, title, time_chart(chart_id, title, desc, Axis(at[0], at[-1]), lines, limit=limit),
                 summary)


def decisions_chart(days: int = 14) -> Chart:
    """Egress decisions per day by verdict, with the deny reasons named in the summary."""
    span = data.days_ending(timezone.now().date(), days)
    at = _midnights(span)
    series = data.decisions_per_day(span)
    title = f"Decisions per day by verdict, last {days} days"
    counts = {verdict: sum(values) for verdict, values in series.items()}
    reasons = data.deny_reasons(since=span[0])
    summary = (", ".join(f"{n:,} {verdict}" for verdict, n in counts.items())
               + (" (deny reasons: " + ", ".join(f"{reason} {n:,}" for reason, n in reasons) + ")"
                  if reasons else "") + ".")
    if not any(counts.values()):
        return Chart("decisions-chart", title, no_data(f"No egress decisions in the last {days} days: "
                                                       "no data yet."), "No decisions yet.", empty=True)
    lines = [Line(verdict, list(zip(at, values, strict=True)), VERDICT_COLOURS[verdict])
             for verdict, values in series.items()]
    return Chart("decisions-chart", title,
                 time_chart("decisions-chart", title, f"One line per verdict, one point per day. {summary}",
                            Axis(at[0], at[-1]), lines), summary)


def _cap_chart(history: CapHistory) -> Chart:
    chart_id = f"cap-chart-{history.cap_id}"
    unit, period = unit_words(history.unit), PERIODS.get(history.window, history.window)
    title = ("Org-wide cap" if history.scope == "org" else f"Cap of {scope_words(history.scope)}") + (
        f": {unit} spent {period}")
    pct = 100 if history.limit <= 0 else max(0, history.spent * 100 // history.limit)
    summary = (f"{amount(history.spent, history.unit)} of a cap of {history.limit:,} spent {period} ({pct}%)"
               + ("; the cap is reached." if history.spent >= history.limit else "."))
    if not history.has_spend:
        return Chart(chart_id, title, no_data(f"No {unit} spent {period}: no data yet. "
                                              f"The cap is {amount(history.limit, history.unit)}."),
                     summary, empty=True)
    line = Line("spent", history.points, COLOURS[0], step=True)
    limit = Limit(history.limit, f"cap {amount(history.limit, history.unit)}")
    desc = f"Running total of {unit} over the cap's window, with the cap drawn as a dashed line. {summary}"
    picture = time_chart(chart_id, title, desc, Axis(history.start, history.end), [line], limit=limit,
                         legend=False)
    return Chart(chart_id, title, picture, summary)


def cap_charts(worker=None) -> list[Chart]:
    """One picture per org cap (worker None) or per cap of that worker."""
    return [_cap_chart(history) for history in cap_histories(worker)]


def wait_chart(days: int = 14) -> Chart:
    """Each held request of the last `days` days as a dot: when it was held, how long it waited, and how
    it ended; the summary gives each outcome's count, median and longest wait."""
    now = timezone.now()
    start = now - dt.timedelta(days=days)
    waits = held_request_waits(start, now)
    title = f"Held-request wait times, last {days} days"
    if not waits:
        empty = no_data(f"No request was held for a person in the last {days} days: no data yet.")
        return Chart("wait-chart", title, empty, "No held requests yet.", empty=True)
    parts = []
    for s in summarise(waits):
        if s.outcome == "waiting":
            parts.append(f"{s.count} still waiting (longest so far {duration(s.longest_seconds)})")
        else:
            parts.append(f"{s.count} {s.outcome} (median {duration(s.median_seconds)}, "
                         f"longest {duration(s.longest_seconds)})")
    summary = f"{len(waits)} held request{'s' if len(waits) != 1 else ''}: " + "; ".join(parts) + "."
    if len(waits) > MAX_DOTS:
        summary += f" The latest {MAX_DOTS} are drawn."
        waits = waits[-MAX_DOTS:]
    dots = [Dot(w.created_at, w.seconds, OUTCOME_COLOURS[w.outcome], w.outcome,
                f"{w.worker}: {w.outcome} after {duration(w.seconds)}, "
                f"held at {w.created_at:%Y-%m-%d %H:%M} UTC")
            for w in waits]
    first = min(w.created_at for w in waits)
    axis = Axis(first - (now - first) * 0.02 - dt.timedelta(seconds=1), now, fmt=duration, integer=False)
    desc = f"One dot per held request: x when it was held, y how long it waited. {summary}"
    return Chart("wait-chart", title, time_chart("wait-chart", title, desc, axis, dots=dots), summary)
