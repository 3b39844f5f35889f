"""SVG drawing for the pages' pictures: a time axis, lines (plain or stepped), dots, and an optional
limit line. No script, no inline style (presentation attributes only: the pages' CSP stays strict).
Every text that reaches the markup goes through `escape`; ids are made by the callers from numbers and
fixed words only."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from controlplane.core.timefmt import duration_text

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM, LEGEND = 560, 190, 64, 16, 22, 30, 150
INK, MUTED, LIMIT_COLOUR = "#374151", "#9ca3af", "#b91c1c"


@dataclass(frozen=True)
class Chart:
    """What a page shows for one picture: the SVG (or the words saying there is nothing to draw yet),
    its title, and a sentence with the numbers that matter, for readers who cannot see the picture."""

    id: str
    title: str
    html: SafeString
    summary: str
    empty: bool = False


@dataclass(frozen=True)
class Line:
    name: str
    points: list[tuple[dt.datetime, float]]
    colour: str
    step: bool = False  # cumulative totals change at an instant: drawn as steps, not slopes
    dashed: bool = False


@dataclass(frozen=True)
class Dot:
    at: dt.datetime
    value: float
    colour: str
    group: str
    label: str  # the dot's tooltip (its <title>): escaped like everything else


@dataclass(frozen=True)
class Limit:
    value: float
    label: str


@dataclass(frozen=True)
class Axis:
    start: dt.datetime
    end: dt.datetime
    fmt: Callable[[float], str] = lambda v: f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"
    y_floor: float = 1.0  # the smallest top of the y axis, so an all-zero series still has a scale
    integer: bool = True  # counts and amounts: no tick between whole numbers


@dataclass
class _Frame:
    axis: Axis
    top: float
    parts: list[str] = field(default_factory=list)

    def x(self, at: dt.datetime) -> float:
        span = (self.axis.end - self.axis.start).total_seconds() or 1.0
        share = (at - self.axis.start).total_seconds() / span
        return LEFT + (WIDTH - LEFT - RIGHT) * min(1.0, max(0.0, share))

    def y(self, value: float) -> float:
        return HEIGHT - BOTTOM - (HEIGHT - TOP - BOTTOM) * max(0.0, value) / self.top


def _time_label(at: dt.datetime, span: dt.timedelta) -> str:
    at = at.astimezone(dt.UTC)
    if span <= dt.timedelta(minutes=10):
        return f"{at:%H:%M:%S}"
    if span <= dt.timedelta(days=1):
        return f"{at:%H:%M}"
    if span <= dt.timedelta(days=370):
        return f"{at:%m-%d}"
    return f"{at:%Y-%m}"


def _text(x: float, y: float, text: str, colour: str = INK, anchor: str = "start", css: str = "") -> str:
    klass = f' class="{css}"' if css else ""
    return (f'<text{klass} x="{x:.1f}" y="{y:.1f}" font-size="11" text-anchor="{anchor}" '
            f'fill="{colour}">{escape(text)}</text>')


def _axes(frame: _Frame) -> None:
    axis, span = frame.axis, frame.axis.end - frame.axis.start
    base = HEIGHT - BOTTOM
    frame.parts.append(f'<line x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}" stroke="{MUTED}"/>'
                       f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}" stroke="{MUTED}"/>')
    for value in _ticks(frame.top, axis.integer):
        frame.parts.append(_text(LEFT - 6, frame.y(value) + 4, axis.fmt(value), anchor="end", css="y-tick"))
    frame.parts.append(_text(LEFT, HEIGHT - 10, _time_label(axis.start, span)))
    frame.parts.append(_text(WIDTH - RIGHT, HEIGHT - 10, _time_label(axis.end, span), anchor="end"))


def _ticks(top: float, integer: bool) -> list[float]:
    """0 and round steps (1, 2 or 5 times a power of ten) up to the top: two to four of them."""
    raw = max(top / 2, 1.0) if integer else top / 2
    magnitude = 10 ** math.floor(math.log10(raw))
    step = max(m * magnitude for m in (1, 2, 5) if m * magnitude <= raw)
    return [step * i for i in range(int(top / step) + 1)]


def _polyline(frame: _Frame, line: Line, width: float) -> str:
    coords: list[tuple[float, float]] = []
    for at, value in line.points:
        x, y = frame.x(at), frame.y(value)
        if line.step and coords:
            coords.append((x, coords[-1][1]))
        coords.append((x, y))
    if line.step and coords:  # a running total holds its last value until the end of the axis
        coords.append((frame.x(frame.axis.end), coords[-1][1]))
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    dash = ' stroke-dasharray="3 3"' if line.dashed else ""
    return (f'<polyline class="series" data-name="{escape(line.name)}" fill="none" stroke="{line.colour}" '
            f'stroke-width="{width:g}"{dash} points="{points}"/>')


def _legend(entries: list[tuple[str, str]]) -> list[str]:
    out = []
    for i, (name, colour) in enumerate(entries):
        y = TOP + 16 * i
        out.append(f'<rect x="{WIDTH + 4}" y="{y - 9}" width="10" height="10" fill="{colour}"/>'
                   + _text(WIDTH + 18, y, name if len(name) <= 22 else name[:21] + "…", colour, css="legend"))
    return out


def time_chart(chart_id: str, title: str, desc: str, axis: Axis, lines: list[Line] = (),
               dots: list[Dot] = (), limit: Limit | None = None, legend: bool = True) -> SafeString:
    """A picture over [axis.start, axis.end]; the y axis starts at 0 and reaches the highest value or
    the limit, whichever is higher, so the limit line is always inside the picture. Without a legend
    (one line the title already names) the picture is narrower."""
    values = [v for line in lines for _, v in line.points] + [d.value for d in dots]
    top = max([axis.y_floor, limit.value if limit else 0, *values]) * 1.08
    frame = _Frame(axis, top)
    width = WIDTH + (LEGEND if legend else 0)
    frame.parts.append(f'<svg class="chart" role="img" viewBox="0 0 {width} {HEIGHT}" '
                       f'width="{width}" height="{HEIGHT}" '
                       f'aria-labelledby="{chart_id}-title {chart_id}-desc">'
                       f'<title id="{chart_id}-title">{escape(title)}</title>'
                       f'<desc id="{chart_id}-desc">{escape(desc)}</desc>')
    _axes(frame)
    if limit is not None:
        y = frame.y(limit.value)
        frame.parts.append(f'<line class="cap-line" x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" '
                           f'y2="{y:.1f}" stroke="{LIMIT_COLOUR}" stroke-dasharray="6 4"/>')
        frame.parts.append(_text(WIDTH - RIGHT, y - 4, limit.label, LIMIT_COLOUR, "end", css="cap-label"))
    # Earlier lines are drawn wider, so where lines coincide (allow and ask both at 1) each stays visible
    # as an edge around the next.
    frame.parts.extend(_polyline(frame, line, 2 + 1.5 * (len(lines) - 1 - i)) for i, line in enumerate(lines))
    for dot in dots:
        frame.parts.append(f'<circle class="dot" data-group="{escape(dot.group)}" cx="{frame.x(dot.at):.1f}" '
                           f'cy="{frame.y(dot.value):.1f}" r="4" fill="{dot.colour}" fill-opacity="0.75">'
                           f'<title>{escape(dot.label)}</title></circle>')
    if legend:
        entries = [(line.name, line.colour) for line in lines]
        entries += list(dict.fromkeys((dot.group, dot.colour) for dot in dots))
        frame.parts.extend(_legend(entries))
    frame.parts.append("</svg>")
    return mark_safe("".join(frame.parts))  # noqa: S308 - every interpolated text is escaped above


def no_data(message: str) -> SafeString:
    """What a picture with nothing to draw shows instead: words, not an empty frame."""
    return mark_safe(f'<p class="chart-empty">{escape(message)}</p>')  # noqa: S308 - escaped


def duration(seconds: float) -> str:
    """The pages' one way to write a length of time (controlplane.core.timefmt)."""
    return duration_text(seconds)
