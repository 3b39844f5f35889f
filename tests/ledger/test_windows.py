"""Windows are calendar day and month in UTC, and all time; caps are configured only in the admin."""

import datetime as dt

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from controlplane.ledger.totals import window_start

UTC = dt.UTC


@pytest.mark.parametrize(("window", "now", "start"), [
    ("day", dt.datetime(2026, 3, 31, 23, 59, 59, 999999, tzinfo=UTC), dt.datetime(2026, 3, 31, tzinfo=UTC)),
    ("day", dt.datetime(2026, 4, 1, 0, 0, tzinfo=UTC), dt.datetime(2026, 4, 1, tzinfo=UTC)),
    ("month", dt.datetime(2026, 2, 28, 12, tzinfo=UTC), dt.datetime(2026, 2, 1, tzinfo=UTC)),
    ("month", dt.datetime(2026, 12, 31, 23, tzinfo=UTC), dt.datetime(2026, 12, 1, tzinfo=UTC)),
    # 01:30 in UTC+02:00 is still the previous day (and month) in UTC.
    ("day", dt.datetime(2026, 5, 1, 1, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))),
     dt.datetime(2026, 4, 30, tzinfo=UTC)),
    ("month", dt.datetime(2026, 5, 1, 1, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))),
     dt.datetime(2026, 4, 1, tzinfo=UTC)),
    ("all", dt.datetime(2026, 5, 1, tzinfo=UTC), None),
])
def test_window_start(window, now, start):
    assert window_start(window, now) == start


def test_unknown_window_is_an_error():
    with pytest.raises(ValueError):
        window_start("week", dt.datetime.now(UTC))


def _routes(resolver, prefix=""):
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            yield from _routes(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern)


def test_no_route_outside_the_admin_touches_caps():
    routes = list(_routes(get_resolver()))
    assert any(r.startswith("admin/ledger/cap") for r in routes)
    words = {"cap", "caps", "budget", "budgets"}
    exposed = [r for r in routes if not r.startswith("admin/") and words & set(r.lower().split("/"))]
    assert exposed == []
