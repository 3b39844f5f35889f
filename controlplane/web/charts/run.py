"""The run timeline's pictures: the run's spend by unit over its life (what its requests reserved, and
the net after settles and releases) and its egress decisions by verdict as running counts."""

from __future__ import annotations

from django.utils import timezone

from controlplane.ledger.history import run_spend
from controlplane.web.charts import data
from controlplane.web.charts.labels import NET, RESERVED, VERDICT_COLOURS, amount, unit_words
from controlplane.web.charts.svg import Axis, Chart, Line, no_data, time_chart


def run_spend_charts(run) -> list[Chart]:
    """One picture per unit the run spent; one "no data yet" picture when it spent nothing."""
    start, end, units = run_spend(run, timezone.now())
    if not units:
        return [Chart("run-spend-chart", f"Run {run.pk}: spend", no_data("Nothing spent by this run yet: "
                                                                       "no data yet."),
                      "Nothing spent yet.", empty=True)]
    charts = []
    for spend in units:
        chart_id = f"run-spend-{spend.unit}"
        title = f"Run {run.pk}: {unit_words(spend.unit)} over the run"
        summary = (f"{amount(spend.net[-1][1], spend.unit)} spent net; "
                   f"{amount(spend.reserved[-1][1], spend.unit)} reserved.")
        # The dashed reserve is drawn over the net line: where the two agree both stay visible.
        lines = [Line("net after settle", spend.net, NET, step=True),
                 Line("reserved", spend.reserved, RESERVED, step=True, dashed=True)]
        desc = ("Running totals from the run's start: the dashed line is what its requests reserved, the "
                f"solid line the net after settles and releases. {summary}")
        picture = time_chart(chart_id, title, desc, Axis(start, end), lines)
        charts.append(Chart(chart_id, title, picture, summary))
    return charts


def run_decisions_chart(run) -> Chart:
    start = run.created_at
    end = run.ended_at or timezone.now()
    series = data.run_decisions(run, start, end)
    end = max([end] + [points[-1][0] for points in series.values()])
    title = f"Run {run.pk}: decisions over the run by verdict"
    counts = {verdict: points[-1][1] for verdict, points in series.items()}
    reasons = data.deny_reasons(run=run)
    summary = (", ".join(f"{n:,} {verdict}" for verdict, n in counts.items())
               + (" (deny reasons: " + ", ".join(f"{reason} {n:,}" for reason, n in reasons) + ")"
                  if reasons else "") + ".")
    if not any(counts.values()):
        empty = no_data("No egress decisions for this run yet: no data yet.")
        return Chart("run-decisions-chart", title, empty, "No decisions yet.", empty=True)
    lines = [Line(verdict, points, VERDICT_COLOURS.get(verdict, NET), step=True)
             for verdict, points in series.items()]
    desc = f"Running count of the run's egress decisions, one line per verdict. {summary}"
    return Chart("run-decisions-chart", title,
                 time_chart("run-decisions-chart", title, desc, Axis(start, end), lines), summary)
