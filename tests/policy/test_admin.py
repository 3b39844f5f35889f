from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from controlplane.audit.models import AuditRecord
from controlplane.policy.engine import GrantRule
from controlplane.policy.models import Grant
from controlplane.policy.preview import describe, examples
from controlplane.vault.models import Secret

pytestmark = pytest.mark.django_db

BASE = {
    "slug": "chat", "description": "", "enabled": "on", "worker": "", "mode": "auto",
    "host": "api.example.com",
    "port": "", "schemes": "https", "methods": "POST", "paths": "/v1/chat/**\n/v1/models", "mcp_tools": "",
    "max_taint": "1", "result_class": "1", "untrusted": "on", "expires_at_0": "", "expires_at_1": "",
    "secret": "", "inject_header": "", "inject_format": "{secret}", "cost_per_call": "0",
}


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    return client


def test_add_saves_through_the_service_and_audits(admin_client):
    resp = admin_client.post("/admin/policy/grant/add/", BASE)
    assert resp.status_code == 302, resp.content.decode()[:3000]
    g = Grant.objects.get(slug="chat")
    assert g.methods == ["POST"] and g.paths == ["/v1/chat/**", "/v1/models"] and g.schemes == ["https"]
    rec = AuditRecord.objects.get(kind="grant_change")
    assert '"admin"' in rec.body and '"root"' in rec.body and '"created"' in rec.body


@pytest.mark.parametrize(("changes", "field_error"), [
    ({"host": "API..example.com"}, "bad host pattern"),
    ({"methods": "FETCH"}, "unknown method"),
    ({"port": "70000"}, "65535"),
    ({"paths": "v1/chat"}, "must start with"),
    ({"inject_header": "authorization"}, "no secret is named"),
    ({"tunnel": "on"}, "tunnel grant"),
])
def test_validation_messages_are_shown_and_nothing_is_saved(admin_client, changes, field_error):
    resp = admin_client.post("/admin/policy/grant/add/", {**BASE, **changes})
    assert resp.status_code == 200
    assert field_error in resp.content.decode()
    assert not Grant.objects.exists() and not AuditRecord.objects.exists()


def test_secret_without_header_and_bad_format(admin_client):
    s = Secret.objects.create(name="oa", kind="openai", ciphertext=b"x", sentinel="sk-proj-test")
    data = {**BASE, "secret": str(s.pk), "inject_format": "Bearer"}
    resp = admin_client.post("/admin/policy/grant/add/", data)
    html = resp.content.decode()
    assert "needs inject_header" in html and "exactly once" in html
    assert not Grant.objects.exists()


def test_change_page_previews_and_change_is_audited(admin_client):
    admin_client.post("/admin/policy/grant/add/", BASE)
    g = Grant.objects.get(slug="chat")
    page = admin_client.get(f"/admin/policy/grant/{g.pk}/change/").content.decode()
    assert "What this grant matches" in page
    assert "✓ matches" in page and "POST https://api.example.com:443/v1/chat/a/b" in page
    assert "✗ does not match" in page
    resp = admin_client.post(f"/admin/policy/grant/{g.pk}/change/", {**BASE, "mode": "ask"})
    assert resp.status_code == 302
    assert Grant.objects.get(pk=g.pk).mode == "ask"
    assert AuditRecord.objects.filter(kind="grant_change").count() == 2


def test_delete_is_audited(admin_client):
    admin_client.post("/admin/policy/grant/add/", BASE)
    g = Grant.objects.get(slug="chat")
    resp = admin_client.post(f"/admin/policy/grant/{g.pk}/delete/", {"post": "yes"})
    assert resp.status_code == 302 and not Grant.objects.exists()
    assert AuditRecord.objects.filter(kind="grant_change", body__contains='"deleted"').count() == 1


def test_preview_examples_agree_with_the_matcher():
    rule = GrantRule(slug="w", host="*.example.com", paths=("/v1/*",), methods=("GET",))
    shown = dict(examples(rule))
    assert shown["GET https://api.example.com:443/v1/x"] is True
    assert shown["GET https://example.com:443/v1/x"] is False
    assert shown["GET https://example.com.evil.example:443/v1/x"] is False
    assert "does not" not in describe(rule) and "*.example.com" in describe(rule)
    tunnel = GrantRule(slug="t", host="pinned.example.com", port=8443, tunnel=True)
    assert ("pinned.example.com:8443", True) in examples(tunnel)
    assert "CONNECT tunnels" in describe(tunnel)


def test_bulk_delete_action_is_audited_per_grant(admin_client):
    admin_client.post("/admin/policy/grant/add/", BASE)
    admin_client.post("/admin/policy/grant/add/", {**BASE, "slug": "chat-two"})
    ids = [str(pk) for pk in Grant.objects.values_list("pk", flat=True)]
    resp = admin_client.post("/admin/policy/grant/", {"action": "delete_selected", "_selected_action": ids,
                                                      "post": "yes"})
    assert resp.status_code == 302 and not Grant.objects.exists()
    assert AuditRecord.objects.filter(kind="grant_change", body__contains='"deleted"').count() == 2
