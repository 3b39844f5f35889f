"""Cap changes: audited as their own kind with the old and the new value; the unit is shown beside the
limit in the admin and on the overview."""

from __future__ import annotations

import json

from django.test import Client

from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append
from controlplane.ledger import caps
from controlplane.ledger.models import Cap
from tests.web.conftest import PASSWORD


def _data(kind: str) -> list[dict]:
    return [json.loads(r.body)["data"] for r in AuditRecord.objects.filter(kind=kind).order_by("seq")]


def test_cap_change_audited_with_old_and_new(admin_user, worker):
    cap = caps.cap_save(Cap(worker=worker, unit="requests", window="day", limit=100), admin_user)
    cap.limit = 250
    caps.cap_save(cap, admin_user)
    caps.cap_delete(cap, admin_user)
    created, changed, deleted = _data("cap_change")
    assert created["action"] == "created" and created["before"] is None and created["after"]["limit"] == 100
    assert changed["before"]["limit"] == 100 and changed["after"]["limit"] == 250
    assert changed["changed"] == ["limit"] and changed["object"] == "cap"
    assert changed["by"] == "dave-admin" and changed["after"]["scope"] == f"worker:{worker.name}"
    assert deleted["before"]["limit"] == 250 and deleted["after"] is None
    # Under the cap's worker: the auditor's worker filter finds every change of it.
    assert set(AuditRecord.objects.filter(kind="cap_change").values_list("worker_name", flat=True)) == {
        worker.name}
    assert not AuditRecord.objects.filter(kind="grant_change").exists()


def test_unit_next_to_the_limit_in_admin_and_overview(admin_user, worker):
    admin_user.is_staff = True
    admin_user.save()
    cap = caps.cap_save(Cap(worker=None, unit="micro", window="month", limit=5_000_000), admin_user)
    client = Client()
    assert client.login(username=admin_user.username, password=PASSWORD)
    change = client.get(f"/admin/ledger/cap/{cap.pk}/change/").content.decode()
    assert "Limit (micro-currency per month)" in change and "1,000,000 = one unit of currency" in change
    listing = client.get("/admin/ledger/cap/").content.decode()
    assert "5,000,000 micro-currency per month" in listing
    overview = client.get("/").content.decode()
    assert '0 / 5000000 <span class="unit">micro-currency</span>' in overview


def test_overview_and_run_show_charts_with_the_cap_line(admin_user, worker, run):
    from controlplane.ledger.models import SpendLine

    caps.cap_save(Cap(worker=None, unit="requests", window="day", limit=40), admin_user)
    SpendLine.objects.create(worker=worker, run=run, kind="settle", unit="requests", amount=12)
    audit_append("decision", {"url": "https://api.example.com/"}, run=run, verdict="allow")
    client = Client()
    assert client.login(username=admin_user.username, password=PASSWORD)
    html = client.get("/").content.decode()
    assert '<svg class="chart"' in html and 'class="cap-line"' in html and "cap 40" in html
    assert 'data-name="alpha"' in html and 'data-name="allow"' in html
    assert "<script" not in html.split('id="spend-chart"')[1].split("</figure>")[0]
    timeline = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-decisions-chart"' in timeline and '<svg class="chart"' in timeline
