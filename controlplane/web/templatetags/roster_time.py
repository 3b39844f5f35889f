"""The time filters every page uses (a builtin: no `{% load %}`), so moments and lengths of time read
the same everywhere: `{{ moment|when }}` is `04:10:05 UTC` today and `2026-12-03 04:10:05 UTC` on any
other day; `{{ moment|when:"ms" }}` adds milliseconds (the run timeline); `{{ seconds|duration }}` is
`23 h 59 min` (controlplane.core.timefmt)."""

from __future__ import annotations

import datetime as dt

from django import template

from controlplane.core.timefmt import duration_text, when_text

register = template.Library()


@register.filter
def when(moment: dt.datetime | None, precision: str = "") -> str:
    if moment is None or moment == "":
        return "—"
    text = when_text(moment)
    if precision == "ms":
        millis = f".{moment.microsecond // 1000:03d}"
        text = text.replace(" UTC", f"{millis} UTC")
    return text


@register.filter
def duration(seconds) -> str:
    if seconds is None or seconds == "":
        return "—"
    return duration_text(seconds)
