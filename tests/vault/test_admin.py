from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from controlplane.audit.models import AuditRecord
from controlplane.vault import services
from controlplane.vault.models import Secret
from tests.vault.conftest import VALUE

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    return client


def test_add_through_admin_encrypts_and_never_shows_the_value(admin_client):
    resp = admin_client.post("/admin/vault/secret/add/", {"name": "oa", "kind": "openai", "value": VALUE})
    assert resp.status_code == 302, resp.content.decode()[:2000]
    secret = Secret.objects.get(name="oa")
    assert services.secret_reveal(secret) == VALUE
    pages = [admin_client.get("/admin/vault/secret/"),
             admin_client.get(f"/admin/vault/secret/{secret.pk}/change/")]
    for page in pages:
        html = page.content.decode()
        assert page.status_code == 200
        assert VALUE not in html and secret.sentinel in html
    change = pages[1].content.decode()
    assert 'type="password"' in change and 'name="value"' in change
    assert AuditRecord.objects.filter(kind="secret_change").count() == 1
    assert all(VALUE not in r.body for r in AuditRecord.objects.all())


def test_change_with_empty_value_keeps_it(admin_client):
    secret = services.secret_set("oa", VALUE, "openai")
    resp = admin_client.post(f"/admin/vault/secret/{secret.pk}/change/", {"name": "oa", "kind": "openai",
                                                                         "value": ""})
    assert resp.status_code == 302
    again = Secret.objects.get(pk=secret.pk)
    assert services.secret_reveal(again) == VALUE and again.sentinel == secret.sentinel


def test_new_secret_needs_a_value_and_errors_do_not_echo(admin_client):
    resp = admin_client.post("/admin/vault/secret/add/", {"name": "oa", "kind": "openai", "value": ""})
    assert resp.status_code == 200 and "needs a value" in resp.content.decode()
    bad = VALUE + "\nX"
    resp = admin_client.post("/admin/vault/secret/add/", {"name": "oa", "kind": "openai", "value": bad})
    assert resp.status_code == 200 and VALUE not in resp.content.decode()
    assert not Secret.objects.exists()


def test_rename_is_refused(admin_client):
    secret = services.secret_set("oa", VALUE, "openai")
    resp = admin_client.post(f"/admin/vault/secret/{secret.pk}/change/", {"name": "other", "kind": "openai",
                                                                         "value": ""})
    assert resp.status_code == 200 and "cannot be renamed" in resp.content.decode()


def test_delete_is_audited(admin_client):
    secret = services.secret_set("oa", VALUE, "openai")
    resp = admin_client.post(f"/admin/vault/secret/{secret.pk}/delete/", {"post": "yes"})
    assert resp.status_code == 302 and not Secret.objects.exists()
    assert AuditRecord.objects.filter(kind="secret_change").count() == 2


def test_kind_change_without_value_keeps_value_and_new_sentinel(admin_client):
    secret = services.secret_set("oa", VALUE, "openai")
    resp = admin_client.post(f"/admin/vault/secret/{secret.pk}/change/", {"name": "oa", "kind": "github",
                                                                         "value": ""})
    assert resp.status_code == 302
    again = Secret.objects.get(pk=secret.pk)
    assert again.kind == "github" and again.sentinel.startswith("ghp_")
    assert services.secret_reveal(again) == VALUE
