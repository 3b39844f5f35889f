"""Admin: audit records and spend lines are read-only for everyone; Auditors view and export and
change nothing; caps are changed only by Admins, and each change is audited."""

import json

import pytest
from django.contrib.auth.models import Group, Permission, User

from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append
from controlplane.core.roles import ADMINS, AUDITORS, ensure_roles
from controlplane.fleet.models import Worker
from controlplane.ledger import services as ledger
from controlplane.ledger.models import Cap, SpendLine

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_hasher(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _login(client, name, group=None, superuser=False):
    ensure_roles()
    user = User.objects.create_user(name, password="pw-" + name, is_staff=True, is_superuser=superuser)
    if group:
        user.groups.add(Group.objects.get(name=group))
    client.force_login(user)
    return user


@pytest.fixture
def chain_and_ledger():
    worker = Worker.objects.create(name="adm-w")
    ledger.reserve(worker=worker, run=None, grant_slug="g", decision_id="dc_a", cost_micro=1, origin="human")
    audit_append("decision", {"i": 1}, worker="adm-w", verdict="allow")
    return worker


def _snapshot():
    return (list(AuditRecord.objects.values_list("seq", "body", "hash")),
            list(SpendLine.objects.values_list("id", "amount")))


@pytest.mark.parametrize("who", [("aud", AUDITORS, False), ("root", None, True), ("adm", ADMINS, False)])
def test_nobody_can_add_change_or_delete_audit_records_or_spend_lines(client, chain_and_ledger, who):
    _login(client, who[0], who[1], who[2])
    rec = AuditRecord.objects.first()
    line = SpendLine.objects.first()
    before = _snapshot()
    assert client.get("/admin/audit/auditrecord/").status_code == 200
    assert client.get(f"/admin/audit/auditrecord/{rec.pk}/change/").status_code == 200  # view-only page
    assert client.get("/admin/audit/auditrecord/add/").status_code == 403
    assert client.get(f"/admin/audit/auditrecord/{rec.pk}/delete/").status_code == 403
    change = client.post(f"/admin/audit/auditrecord/{rec.pk}/change/", {"kind": "x", "body": "{}"})
    assert change.status_code == 403
    assert client.post("/admin/audit/auditrecord/", {"action": "delete_selected",
                                                     "_selected_action": [rec.pk]}).status_code in (200, 302)
    assert client.get("/admin/ledger/spendline/add/").status_code == 403
    assert client.post(f"/admin/ledger/spendline/{line.pk}/delete/", {"post": "yes"}).status_code == 403
    assert _snapshot() == before


def test_auditor_can_export_csv_from_admin(client, chain_and_ledger):
    _login(client, "aud", AUDITORS)
    ids = list(AuditRecord.objects.values_list("pk", flat=True))
    resp = client.post("/admin/audit/auditrecord/", {"action": "export_csv", "_selected_action": ids})
    assert resp.status_code == 200 and resp["Content-Type"].startswith("text/csv")
    text = b"".join(resp.streaming_content).decode()
    assert text.startswith("seq,time,kind") and text.count("\r\n") == len(ids) + 1


def test_user_without_export_permission_cannot_export(client, chain_and_ledger):
    user = _login(client, "viewer")
    user.user_permissions.add(*Permission.objects.filter(codename="view_auditrecord"))
    ids = list(AuditRecord.objects.values_list("pk", flat=True))
    resp = client.post("/admin/audit/auditrecord/", {"action": "export_csv", "_selected_action": ids})
    assert not resp.get("Content-Type", "").startswith("text/csv")


def test_auditor_views_caps_but_cannot_change_them(client, chain_and_ledger):
    cap = Cap.objects.create(worker=chain_and_ledger, unit="requests", window="day", limit=5)
    _login(client, "aud", AUDITORS)
    assert client.get("/admin/ledger/cap/").status_code == 200
    assert client.get("/admin/ledger/cap/add/").status_code == 403
    resp = client.post(f"/admin/ledger/cap/{cap.pk}/change/",
                       {"worker": cap.worker_id, "unit": "requests", "window": "day", "limit": 500})
    assert resp.status_code == 403
    assert client.post(f"/admin/ledger/cap/{cap.pk}/delete/", {"post": "yes"}).status_code == 403
    cap.refresh_from_db()
    assert cap.limit == 5


def test_auditor_permissions_are_view_and_export_only():
    ensure_roles()
    codes = set(Group.objects.get(name=AUDITORS).permissions.values_list("codename", flat=True))
    assert "export_auditrecord" in codes and "view_auditrecord" in codes and "view_cap" in codes
    assert not [c for c in codes if c.startswith(("add_", "change_", "delete_"))]


def test_admin_changes_caps_and_each_change_is_audited(client, chain_and_ledger):
    _login(client, "adm", ADMINS)
    resp = client.post("/admin/ledger/cap/add/", {"worker": chain_and_ledger.pk, "unit": "requests",
                                                  "window": "day", "limit": 7})
    assert resp.status_code == 302, resp.content[:500]
    cap = Cap.objects.get()
    changed = {"worker": chain_and_ledger.pk, "unit": "requests", "window": "day", "limit": 9}
    assert client.post(f"/admin/ledger/cap/{cap.pk}/change/", changed).status_code == 302
    assert client.post(f"/admin/ledger/cap/{cap.pk}/delete/", {"post": "yes"}).status_code == 302
    events = [json.loads(b)["data"] for b in
              AuditRecord.objects.filter(kind="cap_change").values_list("body", flat=True)]
    assert [(e["action"], (e["before"] or {}).get("limit"), (e["after"] or {}).get("limit"), e["by"])
            for e in events] == [("created", None, 7, "adm"), ("updated", 7, 9, "adm"),
                                 ("deleted", 9, None, "adm")]
    assert not Cap.objects.exists()
