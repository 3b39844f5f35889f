from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from django.db import connection

from controlplane.audit.models import AuditRecord
from controlplane.core.errors import ValidationFailed
from controlplane.vault import services
from controlplane.vault.models import Secret
from tests.vault.conftest import VALUE

pytestmark = pytest.mark.django_db


def _raw_ciphertext(name: str) -> bytes:
    with connection.cursor() as cur:
        cur.execute("SELECT ciphertext FROM vault_secret WHERE name = %s", [name])
        return bytes(cur.fetchone()[0])


def test_set_encrypts_and_reveal_decrypts():
    secret = services.secret_set("openai-main", VALUE, "openai")
    raw = _raw_ciphertext("openai-main")
    assert VALUE.encode() not in raw
    assert base64.b64encode(VALUE.encode())[:20] not in raw
    assert services.secret_reveal(Secret.objects.get(pk=secret.pk)) == VALUE
    assert secret.sentinel.startswith("sk-proj-") and VALUE not in secret.sentinel


def test_set_is_audited_by_name_only():
    services.secret_set("gh", VALUE, "github")
    records = list(AuditRecord.objects.filter(kind="secret_change"))
    assert len(records) == 1
    assert '"gh"' in records[0].body and VALUE not in records[0].body
    assert all(VALUE not in r.body for r in AuditRecord.objects.all())


def test_replace_keeps_the_sentinel_unless_the_kind_changes():
    first = services.secret_set("k", VALUE)
    second = services.secret_set("k", VALUE + "2")
    assert second.pk == first.pk and second.sentinel == first.sentinel
    assert services.secret_reveal(second) == VALUE + "2"
    third = services.secret_set("k", VALUE, "aws")
    assert third.sentinel.startswith("AKIA") and third.sentinel != first.sentinel
    assert AuditRecord.objects.filter(kind="secret_change").count() == 3


@pytest.mark.parametrize(("value", "field"), [
    ("", "value"), (None, "value"), (VALUE + "\r\nX-Evil: 1", "value"), ("a\x00b", "value"),
    ("x" * 9000, "value"),
])
def test_bad_values_are_refused_and_nothing_changes(value, field):
    with pytest.raises(ValidationFailed) as info:
        services.secret_set("k", value)
    assert field in info.value.errors
    assert VALUE not in str(info.value)
    assert not Secret.objects.exists() and not AuditRecord.objects.exists()


@pytest.mark.parametrize(("name", "kind", "field"), [("Bad Name", "generic", "name"), ("ok", "ssh", "kind")])
def test_bad_name_or_kind_is_refused(name, kind, field):
    with pytest.raises(ValidationFailed) as info:
        services.secret_set(name, VALUE, kind)
    assert field in info.value.errors and VALUE not in str(info.value)
    assert not Secret.objects.exists() and not AuditRecord.objects.exists()


def test_sentinel_ids_found_in_texts():
    a = services.secret_set("a", VALUE, "openai")
    b = services.secret_set("b", VALUE, "github")
    assert services.sentinel_secret_ids(["nothing here"]) == frozenset()
    assert services.sentinel_secret_ids([f"Bearer {a.sentinel}"]) == {a.pk}
    body = f'{{"k": "{b.sentinel}", "j": "{a.sentinel}"}}'
    assert services.sentinel_secret_ids(["x", body]) == {a.pk, b.pk}
    basic = base64.b64encode(f"x-access-token:{b.sentinel}".encode()).decode()
    assert services.sentinel_secret_ids([f"Basic {basic}"]) == {b.pk}


def test_sentinel_cache_follows_changes_in_this_process():
    a = services.secret_set("a", VALUE, "openai")
    assert services.sentinel_secret_ids([a.sentinel]) == {a.pk}
    b = services.secret_set("b", VALUE, "slack")
    assert services.sentinel_secret_ids([b.sentinel]) == {b.pk}
    old = a.sentinel
    a = services.secret_set("a", VALUE, "aws")
    assert services.sentinel_secret_ids([old]) == frozenset()
    assert services.sentinel_secret_ids([a.sentinel]) == {a.pk}
    services.secret_delete(a)
    assert services.sentinel_secret_ids([a.sentinel]) == frozenset()


def test_sentinel_cache_notices_changes_from_other_processes(settings):
    a = services.secret_set("a", VALUE, "openai")
    assert services.sentinel_secret_ids([a.sentinel]) == {a.pk}
    # queryset.update sends no signal, like a change made by another process (which bumps updated_at).
    Secret.objects.filter(pk=a.pk).update(sentinel="roster-sentinel-" + "Q" * 32,
                                          updated_at=a.updated_at + timedelta(seconds=1))
    settings.ROSTER_VAULT_SENTINEL_CACHE_SECONDS = 0
    assert services.sentinel_secret_ids(["roster-sentinel-" + "Q" * 32]) == {a.pk}


def test_failed_audit_leaves_no_secret(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("audit unavailable")

    monkeypatch.setattr(services, "audit_append", broken)
    with pytest.raises(RuntimeError):
        services.secret_set("a", VALUE)
    assert not Secret.objects.exists()
