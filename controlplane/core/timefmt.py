"""One way to write a moment and a length of time, for every page, the CLI and `make demo`: moments in
UTC with the zone named, the date shown when it is not today; durations in h/min/s ("23 h 59 min",
never "1439 min 58 s")."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

ZONE = dt.UTC  # the zone every moment is written in (settings.TIME_ZONE is UTC; a user's own is not known)
# As `now` for a record meant to be kept (CLI output, exports): never "today", so the date is always written.
EPOCH = dt.datetime(1970, 1, 1, tzinfo=ZONE)


def when_text(moment: dt.datetime | None, now: dt.datetime | None = None, *, seconds: bool = True) -> str:
    """`04:10:05 UTC` today, `2026-12-03 04:10:05 UTC` any other day; "—" for none. A naive moment is
    taken as UTC (the database's)."""
    if moment is None:
        return "—"
    if timezone.is_naive(moment):
        moment = moment.replace(tzinfo=ZONE)
    moment = moment.astimezone(ZONE)
    today = (now or timezone.now()).astimezone(ZONE).date()
    clock = moment.strftime("%H:%M:%S" if seconds else "%H:%M")
    return f"{clock} UTC" if moment.date() == today else f"{moment:%Y-%m-%d} {clock} UTC"


def duration_text(seconds: float | int | dt.timedelta | None) -> str:
    """`12 s`, `4 min 58 s`, `23 h 59 min`, `3 d 2 h`: the two largest units, the smaller one left out when
    it is 0; under 10 s one decimal ("2.5 s"). Negative lengths are 0 s (a deadline already passed)."""
    if seconds is None:
        return "—"
    if isinstance(seconds, dt.timedelta):
        seconds = seconds.total_seconds()
    seconds = max(0.0, float(seconds))
    if seconds < 10:
        return "0 s" if seconds == 0 else f"{seconds:.1f} s".replace(".0 s", " s")
    whole = round(seconds)  # 59.99 s of a measured wait reads as 60 s, not 59
    parts = [(whole // 86400, "d"), (whole % 86400 // 3600, "h"), (whole % 3600 // 60, "min"),
             (whole % 60, "s")]
    first = next(i for i, (amount, _unit) in enumerate(parts) if amount)
    shown = [f"{amount} {unit}" for amount, unit in parts[first:first + 2] if amount]
    return " ".join(shown)
