"""The pictures in a real browser: a held request goes through the real gateway and decision API and is
approved, so the ledger, the audit chain and the approval are the system's own; then the overview (org
caps, wait times), the worker page (its caps) and the run timeline (spend and decisions over the run)
are opened in Chromium. A worker named like a script tag must render as text and run nothing."""

from __future__ import annotations

import datetime as dt
import re
import threading
import time

import pytest
from django.contrib.auth.models import User
from django.db.models import Count
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_decide
from controlplane.audit.models import AuditRecord
from controlplane.fleet.models import Run, Worker
from controlplane.ledger.models import Cap, SpendLine
from tests.integration.browser import harness
from tests.integration.browser.conftest import hold

pytestmark = [pytest.mark.integration, pytest.mark.browser]
HOSTILE = "<script>window.__xss=1</script>"


def _approve_one_held_request(world) -> None:
    request = hold(world)
    deadline = time.monotonic() + 20
    while not Approval.objects.filter(run=world["run"], status="pending").exists():
        assert time.monotonic() < deadline, "the held request never reached the queue"
        time.sleep(0.05)
    approval = Approval.objects.get(run=world["run"])
    time.sleep(1.2)  # a wait a person could see: the dot is not at zero
    decider = threading.Thread(target=approval_decide, args=(approval.pk, world["bob"], True, "cli"))
    decider.start()
    decider.join(20)
    assert request.result().status_code == 200


def _hostile_worker() -> Worker:
    """Created past the form's validation, as a bypass would: the pages must not rely on it."""
    worker = Worker.objects.create(name=HOSTILE)
    run = Run.objects.create(worker=worker)
    SpendLine.objects.create(worker=worker, run=run, kind="reserve", unit="requests", amount=2)
    Approval.objects.create(run=run, grant_slug="g", request={}, request_digest="d" * 64,
                            expires_at=timezone.now() + dt.timedelta(hours=1))  # still waiting
    return worker


def test_cap_wait_and_run_charts(world, page_for):
    _approve_one_held_request(world)
    hostile = _hostile_worker()
    org_cap = Cap.objects.create(worker=None, unit="requests", window="day", limit=10)
    own_cap = Cap.objects.create(worker=world["worker"], unit="micro", window="day", limit=5_000)
    mailer_micro = sum(SpendLine.objects.filter(worker=world["worker"], unit="micro")
                       .values_list("amount", flat=True))
    assert mailer_micro == 1_500  # the grant's cost per call, reserved by the real decision
    requests_today = sum(SpendLine.objects.filter(unit="requests").values_list("amount", flat=True))
    assert requests_today == 3
    root = User.objects.create(username="chartroot", is_staff=True, is_superuser=True)
    dialogs: list[str] = []

    page = page_for(root, "/")
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    org = page.locator(f"#cap-chart-{org_cap.pk}")
    assert org.locator("svg line.cap-line").count() == 1
    assert org.locator("svg text.cap-label").text_content() == "cap 10 requests"
    assert "3 requests of a cap of 10 spent today (UTC) (30%)." in org.locator(".chart-summary").inner_text()
    assert page.locator(f"#cap-chart-{own_cap.pk}").count() == 0  # drawn on the worker's page
    waits = page.locator("#wait-chart")
    assert waits.locator("svg circle.dot").count() == 2
    summary = waits.locator(".chart-summary").inner_text()
    assert re.fullmatch(r"2 held requests: 1 approved \(median \d+(\.\d)? s, longest \d+(\.\d)? s\); "
                        r"1 still waiting \(longest so far \d+(\.\d)? s\)\.", summary), summary
    legend = page.locator("#spend-chart svg text.legend").all_text_contents()
    assert "mailer" in legend and any(text.startswith("<script>") for text in legend)
    harness.shot(page, "31-charts-overview")

    page.goto(world["base_url"] + f"/workers/{world['worker'].pk}/")
    mine = page.locator(f"#cap-chart-{own_cap.pk}")
    assert mine.locator("svg text.cap-label").text_content() == "cap 5,000 micro-currency"
    assert "1,500 micro-currency of a cap of 5,000 spent today (UTC) (30%)." in mine.inner_text()
    assert page.locator(f"#cap-chart-{org_cap.pk}").count() == 0
    harness.shot(page, "32-charts-worker")

    page.goto(world["base_url"] + f"/runs/{world['run'].pk}/")
    verdicts = dict(AuditRecord.objects.filter(kind="decision", run_id_ref=world["run"].pk)
                    .values_list("verdict").annotate(n=Count("id")).order_by())
    assert verdicts.get("ask") == 1
    decisions = page.locator("#run-decisions-chart")
    assert decisions.locator("svg polyline.series").count() == 3
    assert decisions.locator(".chart-summary").inner_text().startswith(
        f"{verdicts.get('allow', 0)} allow, {verdicts.get('deny', 0)} deny, 1 ask")
    micro = page.locator("#run-spend-micro")
    assert "1,500 micro-currency spent net; 1,500 micro-currency reserved." in micro.inner_text()
    assert micro.locator('svg polyline[data-name="reserved"]').count() == 1
    assert page.locator("#run-spend-bytes svg").count() == 1  # the outcome settled the bytes
    harness.shot(page, "33-charts-run")

    page.goto(world["base_url"] + f"/workers/{hostile.pk}/")
    assert page.locator("h1").inner_text() == f"Worker {HOSTILE}"
    assert page.evaluate("window.__xss") is None and dialogs == []


def test_overview_charts_draw_spend_and_the_cap_line(world, page_for):
    from controlplane.audit.services import audit_append

    Cap.objects.create(worker=None, unit="requests", window="day", limit=10)
    SpendLine.objects.create(worker=world["worker"], run=world["run"], kind="settle", unit="requests",
                             amount=4)
    audit_append("decision", {"url": "http://127.0.0.1/"}, run=world["run"], verdict="allow")
    root = User.objects.create(username="chartroot", is_staff=True, is_superuser=True)
    page = page_for(root, "/")
    assert page.locator("#spend-chart svg polyline[data-name=mailer]").count() == 1
    assert page.locator("#spend-chart svg line.cap-line").count() == 1
    assert page.locator("#decisions-chart svg polyline").count() == 3
    harness.shot(page, "30-overview-charts")


def test_an_empty_overview_says_no_data_yet(world, page_for):
    root = User.objects.create(username="chartroot", is_staff=True, is_superuser=True)
    page = page_for(root, "/")
    for chart_id in ("spend-chart", "decisions-chart", "wait-chart"):
        assert "no data yet" in page.locator(f"#{chart_id} .chart-empty").inner_text()
        assert page.locator(f"#{chart_id} svg").count() == 0
    harness.shot(page, "34-charts-empty")
