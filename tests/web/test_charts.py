"""The pictures on the overview, the worker page and the run timeline: each cap drawn with its limit
and unit, held-request wait times counted by outcome, a run's spend and decisions, a clear "no data
yet" where there is nothing to draw, and every name and reason escaped."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.audit.services import audit_append
from controlplane.fleet.models import Run, Worker
from controlplane.fleet.services import run_create
from controlplane.ledger.models import Cap, SpendLine
from tests.web.conftest import PASSWORD


def _client(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def _figure(html: str, chart_id: str) -> str:
    match = re.search(rf'<figure class="chart[^"]*" id="{re.escape(chart_id)}">(.*?)</figure>', html, re.S)
    assert match, f"no figure {chart_id}"
    return match.group(1)


def _held(run, seconds_ago: float, **fields) -> Approval:
    approval = Approval.objects.create(run=run, grant_slug="g", request={}, request_digest="d" * 64,
                                       expires_at=timezone.now() + dt.timedelta(hours=1), **fields)
    created = timezone.now() - dt.timedelta(seconds=seconds_ago)
    Approval.objects.filter(pk=approval.pk).update(created_at=created)
    return approval


def test_empty_pages_say_no_data_yet(admin_user, worker, run):
    client = _client(admin_user)
    overview = client.get("/").content.decode()
    for chart_id in ("spend-chart", "decisions-chart", "wait-chart"):
        figure = _figure(overview, chart_id)
        assert "no data yet" in figure and "<svg" not in figure
    Cap.objects.create(worker=None, unit="tokens", window="month", limit=9_000)
    cap = Cap.objects.get()
    figure = _figure(client.get("/").content.decode(), f"cap-chart-{cap.pk}")
    assert "No model tokens spent this month (UTC): no data yet. The cap is 9,000 model tokens." in figure
    timeline = client.get(f"/runs/{run.pk}/").content.decode()
    assert "no data yet" in _figure(timeline, "run-decisions-chart")
    assert "Nothing spent by this run yet" in _figure(timeline, "run-spend-chart")
    page = client.get(f"/workers/{worker.pk}/").content.decode()
    assert "This worker has no caps of its own." in page
    assert "no data yet" in _figure(page, "worker-spend-chart")


def test_org_caps_on_the_overview_and_a_workers_caps_on_its_page(admin_user, worker, run):
    org = Cap.objects.create(worker=None, unit="requests", window="day", limit=40)
    own = Cap.objects.create(worker=worker, unit="micro", window="month", limit=5_000_000)
    SpendLine.objects.create(worker=worker, run=run, kind="reserve", unit="requests", amount=12)
    SpendLine.objects.create(worker=worker, run=run, kind="reserve", unit="micro", amount=1_250_000)
    client = _client(admin_user)
    overview = client.get("/").content.decode()
    figure = _figure(overview, f"cap-chart-{org.pk}")
    assert 'class="cap-line"' in figure and "cap 40 requests</text>" in figure
    assert "12 requests of a cap of 40 spent today (UTC) (30%)." in figure
    assert f'aria-labelledby="cap-chart-{org.pk}-title cap-chart-{org.pk}-desc"' in figure
    assert f'id="cap-chart-{own.pk}"' not in overview  # a worker's cap is drawn on its page
    assert f'href="/workers/{worker.pk}/"' in overview
    page = client.get(f"/workers/{worker.pk}/").content.decode()
    mine = _figure(page, f"cap-chart-{own.pk}")
    assert "cap 5,000,000 micro-currency</text>" in mine and "(25%)" in mine
    assert f'id="cap-chart-{org.pk}"' not in page
    assert f'href="/runs/{run.pk}/"' in page


def test_a_reached_cap_says_so(admin_user, worker, run):
    cap = Cap.objects.create(worker=worker, unit="requests", window="all", limit=3)
    for _ in range(4):
        SpendLine.objects.create(worker=worker, run=run, kind="reserve", unit="requests", amount=1)
    page = _client(admin_user).get(f"/workers/{worker.pk}/").content.decode()
    figure = _figure(page, f"cap-chart-{cap.pk}")
    assert "4 requests of a cap of 3 spent in all (133%); the cap is reached." in figure


def test_wait_times_counted_by_outcome(admin_user, run):
    now = timezone.now()
    _held(run, 600, status="approved", decided_at=now - dt.timedelta(seconds=590))
    _held(run, 500, status="approved", decided_at=now - dt.timedelta(seconds=470))
    _held(run, 400, status="refused", decided_at=now - dt.timedelta(seconds=340))
    _held(run, 30)  # still held
    figure = _figure(_client(admin_user).get("/").content.decode(), "wait-chart")
    assert ("4 held requests: 2 approved (median 20 s, longest 30 s); "
            "1 refused (median 1 min, longest 1 min); 1 still waiting (longest so far 30 s).") in figure
    assert figure.count('<circle class="dot"') == 4 and figure.count('data-group="approved"') == 2


def test_run_timeline_draws_spend_by_unit_and_decisions(admin_user, worker, run):
    SpendLine.objects.create(worker=worker, run=run, kind="reserve", unit="micro", amount=2_000)
    SpendLine.objects.create(worker=worker, run=run, kind="release", unit="micro", amount=-1_500)
    SpendLine.objects.create(worker=worker, run=run, kind="reserve", unit="requests", amount=1)
    audit_append("decision", {"url": "https://a.example/"}, run=run, verdict="allow")
    audit_append("decision", {"url": "https://b.example/"}, run=run, verdict="deny", reason="no_grant")
    audit_append("decision", {"url": "https://c.example/"}, run=run, verdict="deny", reason="no_grant")
    other, _ = run_create(worker, command=["x"])
    audit_append("decision", {"url": "https://d.example/"}, run=other, verdict="ask")
    timeline = _client(admin_user).get(f"/runs/{run.pk}/").content.decode()
    micro = _figure(timeline, "run-spend-micro")
    assert "500 micro-currency spent net; 2,000 micro-currency reserved." in micro
    assert 'data-name="reserved"' in micro and 'data-name="net after settle"' in micro
    assert "1 request spent net" in _figure(timeline, "run-spend-requests")
    decisions = _figure(timeline, "run-decisions-chart")
    assert "1 allow, 2 deny, 0 ask (deny reasons: no_grant 2)." in decisions


def test_names_and_reasons_are_escaped_everywhere(admin_user):
    # The admin form refuses such a name; the pages must not trust that it did.
    hostile = Worker.objects.create(name="<script>alert(1)</script>")
    run = Run.objects.create(worker=hostile)
    Cap.objects.create(worker=hostile, unit="requests", window="day", limit=5)
    SpendLine.objects.create(worker=hostile, run=run, kind="reserve", unit="requests", amount=2)
    audit_append("decision", {}, run=run, verdict="deny", reason="<img src=x onerror=alert(2)>")
    _held(run, 20)
    client = _client(admin_user)
    for path in ("/", f"/workers/{hostile.pk}/", f"/runs/{run.pk}/"):
        html = client.get(path).content.decode()
        assert "<script>alert(1)" not in html and "<img src=x" not in html
    overview = client.get("/").content.decode()
    assert 'data-name="&lt;script&gt;alert(1)&lt;/script&gt;"' in _figure(overview, "spend-chart")
    assert "&lt;img src=x onerror=alert(2)&gt; 1" in _figure(overview, "decisions-chart")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;: waiting after" in _figure(overview, "wait-chart")


def test_worker_page_needs_the_view_permission(nobody, admin_user, worker):
    assert _client(nobody).get(f"/workers/{worker.pk}/").status_code == 403
    assert _client(admin_user).get("/workers/999999/").status_code == 404
    anonymous = Client().get(f"/workers/{worker.pk}/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


@pytest.mark.parametrize("path", ["/", "/workers/{worker}/", "/runs/{run}/"])
def test_chart_pages_keep_the_strict_csp(admin_user, worker, run, path):
    response = _client(admin_user).get(path.format(worker=worker.pk, run=run.pk))
    assert response.status_code == 200 and "script-src 'self'" in response["Content-Security-Policy"]


@pytest.mark.parametrize(("top", "integer", "ticks"), [
    (1.08, True, [0, 1]), (10.8, True, [0, 5, 10]), (5400, True, [0, 2000, 4000]),
    (1.5, False, [0, 0.5, 1.0, 1.5]), (324, False, [0, 100, 200, 300]),
])
def test_axis_ticks_are_round_numbers(top, integer, ticks):
    from controlplane.web.charts.svg import _ticks

    assert _ticks(top, integer) == pytest.approx(ticks)


def test_the_svg_escapes_title_desc_legend_and_tooltips():
    from controlplane.web.charts.svg import Axis, Dot, Limit, Line, time_chart

    start = timezone.now()
    end = start + dt.timedelta(hours=1)
    bad = '"><script>x()</script>'
    svg = time_chart("c1", bad, bad, Axis(start, end), [Line(bad, [(start, 1), (end, 2)], "#000")],
                     dots=[Dot(start, 3, "#000", bad, bad)], limit=Limit(4, bad))
    assert "<script>" not in svg and '"><script' not in svg
    # title, desc, limit; the line: its name and legend; the dot: its group, tooltip and legend
    assert svg.count("&lt;script&gt;") == 8


def test_a_busy_fortnight_draws_the_latest_waits_and_counts_them_all(admin_user, run, monkeypatch):
    from controlplane.web.charts import overview

    monkeypatch.setattr(overview, "MAX_DOTS", 3)
    for seconds_ago in (50, 40, 30, 20, 10):
        _held(run, seconds_ago, status="refused", decided_at=timezone.now())
    figure = _figure(_client(admin_user).get("/").content.decode(), "wait-chart")
    assert "5 held requests: 5 refused" in figure and "The latest 3 are drawn." in figure
    assert figure.count('<circle class="dot"') == 3


def test_a_day_below_zero_still_draws_inside_the_frame(admin_user, worker, run):
    cap = Cap.objects.create(worker=worker, unit="tokens", window="day", limit=100)
    SpendLine.objects.create(worker=worker, run=run, kind="release", unit="tokens", amount=-3_100)
    page = _client(admin_user).get(f"/workers/{worker.pk}/").content.decode()
    figure = _figure(page, f"cap-chart-{cap.pk}")
    assert "-3,100 model tokens of a cap of 100 spent today (UTC) (0%)." in figure
    ys = [float(y) for y in re.findall(r'points="[^"]*"', figure)[0][8:-1].replace(",", " ").split()[1::2]]
    assert all(22 <= y <= 160 for y in ys)  # clamped to the axis, never drawn outside the picture
