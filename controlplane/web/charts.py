"""Pictures rendered on the server as SVG (no script, no library; the page's CSP stays strict): spend
per day per worker with the daily cap drawn as a line, and decisions per day by verdict. Names and
numbers are escaped; nothing a box wrote is drawn."""

from __future__ import annotations

from datetime import date, timedelta

from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from controlplane.audit.models import AuditRecord
from controlplane.ledger.models import Cap, SpendLine

WIDTH, HEIGHT, PAD, LEGEND = 560, 180, 36, 100
COLOURS = ["#1d4ed8", "#b45309", "#047857", "#7c3aed", "#be123c", "#0e7490"]
VERDICT_COLOURS = {"allow": "#047857", "deny": "#b91c1c", "ask": "#b45309"}


def _days(n: int) -> list[date]:
    today = timezone.now().date()
    return [today - timedelta(days=n - 1 - i) for i in range(n)]


def _svg(title: str, days: list[date], series: dict[str, list[int]], colours: dict[str, str],
         cap: int | None = None) -> SafeString:
    top = max([cap or 0] + [v for values in series.values() for v in values] + [1])
    step = (WIDTH - 2 * PAD) / max(1, len(days) - 1)

    def y(value: int) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * value / top

    parts = [f'<svg class="chart" role="img" viewBox="0 0 {WIDTH + LEGEND} {HEIGHT}" '
             f'width="{WIDTH + LEGEND}" height="{HEIGHT}" aria-label="{escape(title)}">'
             f'<title>{escape(title)}</title>',
             f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
             'stroke="#9ca3af"/>',
             f'<text x="{PAD}" y="{PAD - 8}" font-size="11" fill="#374151">max {top:,}</text>',
             f'<text x="{PAD}" y="{HEIGHT - 8}" font-size="11" fill="#374151">{days[0]:%m-%d}</text>',
             f'<text x="{WIDTH - PAD}" y="{HEIGHT - 8}" font-size="11" text-anchor="end" '
             f'fill="#374151">{days[-1]:%m-%d}</text>']
    if cap:
        parts.append(f'<line class="cap-line" x1="{PAD}" y1="{y(cap):.1f}" x2="{WIDTH - PAD}" '
                     f'y2="{y(cap):.1f}" stroke="#b91c1c" stroke-dasharray="6 4"/>'
                     f'<text x="{WIDTH - PAD}" y="{y(cap) - 4:.1f}" font-size="11" text-anchor="end" '
                     f'fill="#b91c1c">cap {cap:,}</text>')
    for i, (name, values) in enumerate(series.items()):
        points = " ".join(f"{PAD + step * d:.1f},{y(v):.1f}" for d, v in enumerate(values))
        colour = colours.get(name, COLOURS[i % len(COLOURS)])
        parts.append(f'<polyline class="series" data-name="{escape(name)}" fill="none" stroke="{colour}" '
                     f'stroke-width="2" points="{points}"/>')
        parts.append(f'<text x="{WIDTH - PAD + 4}" y="{PAD + 14 * i}" font-size="11" fill="{colour}">'
                     f'{escape(name)}</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every interpolated name is escaped above


def spend_chart(unit: str = "requests", days: int = 14, worker=None, run=None) -> SafeString:
    span = _days(days)
    lines = SpendLine.objects.filter(unit=unit, created_at__date__gte=span[0])
    if worker is not None:
        lines = lines.filter(worker=worker)
    if run is not None:
        lines = lines.filter(run=run)
    rows = (lines.annotate(day=TruncDate("created_at")).values("worker__name", "day")
            .annotate(total=Sum("amount")))
    series: dict[str, list[int]] = {}
    for row in rows:
        values = series.setdefault(row["worker__name"], [0] * len(span))
        if row["day"] in span:
            values[span.index(row["day"])] = max(0, int(row["total"] or 0))
    caps = Cap.objects.filter(unit=unit, window="day")
    scoped = caps.filter(worker=worker) if worker is not None else caps.filter(worker__isnull=True)
    cap = scoped.first()
    return _svg(f"{unit} spent per day, last {days} days", span, series or {"no spend": [0] * len(span)},
                {}, cap.limit if cap else None)


def decisions_chart(days: int = 14, run=None) -> SafeString:
    span = _days(days)
    records = AuditRecord.objects.filter(kind="decision", created_at__date__gte=span[0])
    if run is not None:
        records = records.filter(run_id_ref=run.pk)
    rows = (records.annotate(day=TruncDate("created_at")).values("verdict", "day").annotate(n=Count("id")))
    series = {verdict: [0] * len(span) for verdict in VERDICT_COLOURS}
    for row in rows:
        if row["verdict"] in series and row["day"] in span:
            series[row["verdict"]][span.index(row["day"])] = row["n"]
    return _svg(f"decisions per day by verdict, last {days} days", span, series, VERDICT_COLOURS)
