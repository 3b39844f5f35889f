"""Issue 27.10: one way to write time everywhere. Moments in UTC with the zone named and the date when
it is not today; durations in h/min/s; every page uses the filters (no page formats a time itself)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from django.template import Context, Template
from django.urls import reverse
from django.utils import timezone

from controlplane.core.timefmt import EPOCH, duration_text, when_text
from controlplane.fleet.models import Run
from tests.web.conftest import open_approval
from tests.web.test_approval_views import QUEUE, _login

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
NOW = dt.datetime(2026, 12, 2, 12, 0, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0 s"), (-5, "0 s"), (2.5, "2.5 s"), (7, "7 s"), (59, "59 s"), (60, "1 min"), (298, "4 min 58 s"),
    (3600, "1 h"), (1439 * 60 + 58, "23 h 59 min"), (86400 + 7200 + 5, "1 d 2 h"), (5 * 86400, "5 d"),
    (dt.timedelta(minutes=90), "1 h 30 min"),
])
def test_durations_in_h_min_s(seconds, text):
    assert duration_text(seconds) == text


def test_moments_name_the_zone_and_the_date_when_not_today():
    assert when_text(NOW.replace(hour=4, minute=10, second=5), NOW) == "04:10:05 UTC"
    assert when_text(NOW + dt.timedelta(days=1), NOW) == "2026-12-03 12:00:00 UTC"
    # Another zone's moment is written in UTC: 23:30 in UTC-5 is the next day's 04:30.
    eastern = dt.timezone(dt.timedelta(hours=-5))
    assert when_text(dt.datetime(2026, 12, 1, 23, 30, tzinfo=eastern), NOW) == "04:30:00 UTC"
    assert when_text(NOW, EPOCH) == "2026-12-02 12:00:00 UTC" and when_text(None) == "—"


def test_the_filters_are_builtins_of_every_template():
    now = timezone.now()
    text = Template("{{ a|when }} | {{ b|when }} | {{ c|duration }} | {{ d|when:'ms' }}").render(Context({
        "a": now, "b": now - dt.timedelta(days=2), "c": 86398, "d": now.replace(microsecond=123456)}))
    a, b, c, d = text.split(" | ")
    assert a.endswith(" UTC") and len(a) == len("00:00:00 UTC")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", b) and c == "23 h 59 min"
    assert d.endswith(".123 UTC")


def test_no_page_formats_a_time_itself():
    # Only machine formats (ISO for <time datetime>, epoch seconds for the countdown) may use |date.
    offenders = []
    for path in TEMPLATES.rglob("*.html"):
        for fmt in re.findall(r"\|date:[\"']([^\"']*)[\"']", path.read_text()):
            if fmt not in ("c", "U"):
                offenders.append(f"{path.relative_to(TEMPLATES)}: |date:{fmt!r}")
    assert not offenders, offenders


def test_run_timeline_shows_the_date_of_a_run_not_from_today(approver, run):
    created = timezone.now() - dt.timedelta(days=3)
    Run.objects.filter(pk=run.pk).update(created_at=created)
    html = _login(approver).get(reverse("web:run", args=[run.pk])).content.decode()
    assert f"{created:%Y-%m-%d %H:%M:%S} UTC" in html


def test_approval_card_counts_down_in_min_and_s(approver, run, settings):
    settings.ROSTER_APPROVAL_TTL_SECONDS = 300
    open_approval(run)
    html = _login(approver).get(QUEUE).content.decode()
    countdown = html[html.index('class="countdown"'):]
    countdown = countdown[countdown.index(">") + 1:countdown.index("</time>")]
    assert re.fullmatch(r"4 min \d\d? s|5 min", countdown), countdown
