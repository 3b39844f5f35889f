"""Overview, run timeline and login pages: who may see them and that they show what happened."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from controlplane.approvals.services import approval_decide
from controlplane.core.roles import ensure_roles
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_set_status
from controlplane.ledger.models import Cap
from controlplane.ledger.services import reserve, settle
from tests.web.conftest import PASSWORD, open_approval

OVERVIEW = reverse("web:overview")


def _login(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_login_page_is_labelled_and_signs_in(approver):
    client = Client()
    html = client.get("/accounts/login/").content.decode()
    assert '<label for="id_username">' in html and '<label for="id_password">' in html
    assert "<main" in html and "<h1>" in html
    response = client.post("/accounts/login/", {"username": approver.username, "password": PASSWORD})
    assert response.status_code == 302
    assert "alice-approver" in client.get(OVERVIEW).content.decode()


def test_wrong_password_is_refused(approver):
    client = Client()
    response = client.post("/accounts/login/", {"username": approver.username, "password": "nope"})
    assert response.status_code == 200 and "didn't match" in response.content.decode()
    assert client.get(OVERVIEW).status_code == 302


def test_overview_requires_login_and_a_role(nobody):
    assert Client().get(OVERVIEW).status_code == 302
    assert _login(nobody).get(OVERVIEW).status_code == 403


def test_overview_shows_workers_live_runs_pending_and_cap_bars(approver, worker, run, approval):
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=4)
    Cap.objects.create(worker=None, unit="micro", window="month", limit=1000)
    reserve(worker=worker, run=run, grant_slug="g", decision_id="dc_1", cost_micro=250, origin="human")
    html = _login(approver).get(OVERVIEW).content.decode()
    assert "alpha" in html
    assert f'href="{reverse("web:run", args=[run.pk])}"' in html
    assert '<strong id="overview-pending">1</strong>' in html
    assert '<meter min="0" max="4"' in html and 'value="1"' in html and "25%" in html
    assert '<meter min="0" max="1000"' in html and 'value="250"' in html


def test_overview_marks_a_reached_cap(approver, worker, run):
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=1)
    reserve(worker=worker, run=run, grant_slug="g", decision_id="dc_1", cost_micro=0, origin="human")
    assert "cap reached" in _login(approver).get(OVERVIEW).content.decode()


def test_timeline_has_state_changes_spend_and_who_approved(approver, worker, run):
    run_set_status(run.pk, Run.Status.STARTING)
    reserve(worker=worker, run=run, grant_slug="paid", decision_id="dc_9", cost_micro=700, origin="human")
    settle("dc_9", 100, 2000)
    approval = open_approval(run)
    approval_decide(approval.pk, approver, approve=True, channel="web")
    run_set_status(run.pk, Run.Status.FAILED, reason="boom")
    html = _login(approver).get(reverse("web:run", args=[run.pk])).content.decode()
    assert "queued → starting" in html and "starting → failed boom" in html
    assert "700 micro" in html and "2100 bytes" in html
    assert '<dd id="total-micro">700</dd>' in html and '<dd id="total-bytes">2100</dd>' in html
    assert "alice-approver" in html and "approved" in html
    order = [html.index(s) for s in ("queued → starting", "reserve for dc_9", "settle for dc_9",
                                     "opened POST", "starting → failed")]
    assert order == sorted(order)


def test_timeline_masks_sentinels_in_urls(approver, run):
    from controlplane.vault.models import Secret

    Secret.objects.create(name="gh", sentinel="ghp_rosterSENTINELxyz", ciphertext=b"x")
    open_approval(run, url="https://api.github.com/?t=ghp_rosterSENTINELxyz")
    html = _login(approver).get(reverse("web:run", args=[run.pk])).content.decode()
    assert "ghp_rosterSENTINELxyz" not in html and "sentinel of gh" in html


def test_timeline_needs_view_run(nobody, run):
    assert _login(nobody).get(reverse("web:run", args=[run.pk])).status_code == 403


def test_unknown_run_is_404(approver):
    assert _login(approver).get(reverse("web:run", args=[999999])).status_code == 404


def test_roles_give_deciding_only_to_approvers_and_admins(db):
    ensure_roles()
    for name, group, can_decide in [("ap", "Approvers", True), ("au", "Auditors", False),
                                    ("ad", "Admins", True)]:
        user = User.objects.create_user(name)
        user.groups.add(Group.objects.get(name=group))
        user = User.objects.get(pk=user.pk)
        assert user.has_perm("approvals.decide_approval") is can_decide, name
    auditor = User.objects.get(username="au")
    assert auditor.has_perm("audit.export_auditrecord") and auditor.has_perm("audit.view_auditrecord")
    assert not any(p.startswith(("fleet.change", "policy.change", "audit.add", "approvals.change"))
                   for p in auditor.get_all_permissions())


def test_assets_are_served_and_nothing_else(db):
    client = Client()
    css = client.get(reverse("web:asset", args=["roster.css"]))
    assert css.status_code == 200 and css["Content-Type"] == "text/css"
    assert client.get(reverse("web:asset", args=["queue.js"])).status_code == 200
    assert client.get("/assets/..%2Fviews.py").status_code == 404
    assert client.get(reverse("web:asset", args=["views.py"])).status_code == 404


def test_nobody_may_edit_append_only_records(db):
    ensure_roles()
    admin = User.objects.create_user("root-ish")
    admin.groups.add(Group.objects.get(name="Admins"))
    admin = User.objects.get(pk=admin.pk)
    assert admin.has_perm("policy.change_grant") and admin.has_perm("audit.export_auditrecord")
    for perm in ("audit.change_auditrecord", "audit.delete_auditrecord", "audit.add_auditrecord",
                 "ledger.change_spendline", "ledger.delete_spendline", "audit.delete_modeltrace"):
        assert not admin.has_perm(perm), perm


def test_timeline_shows_output_as_quoted_data_and_traces(approver, run):
    from controlplane.audit.models import ModelTrace

    Run.objects.filter(pk=run.pk).update(output="<script>alert('out')</script>done")
    ModelTrace.objects.create(run_id_ref=run.pk, grant_slug="model", decision_id="dc_t", method="POST",
                              url="https://api.model.example/v1/chat", sha256="cd" * 32, size=321,
                              body=b"prompt")
    html = _login(approver).get(reverse("web:run", args=[run.pk])).content.decode()
    assert "&lt;script&gt;alert(&#x27;out&#x27;)&lt;/script&gt;done" in html and "<script>alert" not in html
    assert "https://api.model.example/v1/chat" in html and "321" in html
    assert "prompt" not in html  # the traced body itself stays in the database


@pytest.mark.parametrize("run_id", [2**63, 10**20])
def test_timeline_of_an_id_beyond_the_database_is_404(approver, run_id):
    assert _login(approver).get(f"/runs/{run_id}/").status_code == 404


def test_timeline_of_a_queued_run_says_why_it_waits_and_its_position(approver, worker, settings):
    from controlplane.fleet.services import run_create

    settings.ROSTER_BOX_NAMESPACE, settings.ROSTER_BOXES_PER_HOST = "rstpage", 1
    busy, waiting = (run_create(worker, command=["true"])[0] for _ in range(2))
    Run.objects.filter(pk=busy.pk).update(status=Run.Status.RUNNING, box_host="rstpage")
    html = _login(approver).get(f"/runs/{waiting.pk}/").content.decode()
    assert ('<dd id="queue-reason">waiting for a box slot: all 1 on this host are in use; position 1 of 1 '
            "(next in line)</dd>") in html
    assert '<dd id="queue-position">1 of 1 (1 of 1 box slots in use on this host)</dd>' in html
    assert 'id="queue-reason"' not in _login(approver).get(f"/runs/{busy.pk}/").content.decode()
