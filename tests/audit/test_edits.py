"""The one audited save/delete (controlplane.audit.edits): who, what, before and after (credential-like
values masked), what changed, under the worker it concerns, in the edit's own transaction; an edit that
changes nothing leaves no record."""

from __future__ import annotations

import json

import pytest
from django.db import transaction

from controlplane.audit import edits
from controlplane.audit.edits import MASKED, AuditedModel
from controlplane.audit.models import AuditRecord
from controlplane.fleet.services import worker_create
from controlplane.policy.grant_services import GRANT_EDITS
from controlplane.policy.models import Grant
from controlplane.proposals.models import Destination

pytestmark = pytest.mark.django_db
HOOK_TOKEN = "hook-token-Zq81mXc"

DESTINATION = AuditedModel(
    "destination", name=lambda d: d.name, masked=frozenset({"url"}),
    describe=lambda d: {"kind": d.kind, "url": d.url, "enabled": d.enabled},
)


def _records(kind: str = "grant_change") -> list[tuple[str, dict]]:
    return [(r.worker_name, json.loads(r.body)["data"])
            for r in AuditRecord.objects.filter(kind=kind).order_by("seq")]


def test_created_updated_deleted_each_recorded_with_before_after_and_what_changed():
    dest = Destination(name="hook", kind="webhook", url=f"https://hooks.example/{HOOK_TOKEN}")
    assert DESTINATION.save(dest, by="ana", via="admin") == "created"
    dest.enabled = False
    assert DESTINATION.save(dest, by="ben", via="cli") == "updated"
    DESTINATION.delete(dest, by="ana", via="admin")
    (_, created), (_, updated), (_, deleted) = _records()
    assert (created["object"], created["name"], created["action"], created["by"], created["via"]) == (
        "destination", "hook", "created", "ana", "admin")
    assert created["before"] is None and created["after"]["enabled"] is True
    assert updated["before"]["enabled"] is True and updated["after"]["enabled"] is False
    assert updated["changed"] == ["enabled"] and updated["by"] == "ben"
    assert deleted["action"] == "deleted" and deleted["after"] is None
    assert deleted["before"]["kind"] == "webhook"
    assert not Destination.objects.exists()


def test_credential_like_values_are_masked_but_their_change_is_named():
    dest = Destination(name="hook", kind="webhook", url=f"https://hooks.example/{HOOK_TOKEN}")
    DESTINATION.save(dest, by="ana", via="admin")
    dest.url = "https://hooks.example/another-token"
    assert DESTINATION.save(dest, by="ana", via="admin") == "updated"
    for record in AuditRecord.objects.all():
        assert HOOK_TOKEN not in record.body and "another-token" not in record.body
    _, updated = _records()[-1]
    assert updated["before"]["url"] == MASKED and updated["after"]["url"] == MASKED
    assert updated["changed"] == ["url"]


def test_an_edit_that_changes_nothing_is_neither_written_nor_recorded():
    dest = Destination(name="hook", kind="webhook", url="https://hooks.example/x")
    DESTINATION.save(dest, by="ana", via="admin")
    stamp = Destination.objects.get(pk=dest.pk).updated_at
    assert DESTINATION.save(Destination.objects.get(pk=dest.pk), by="ben", via="admin") == "unchanged"
    assert Destination.objects.get(pk=dest.pk).updated_at == stamp
    assert len(_records()) == 1


def test_before_is_the_stored_row_not_the_callers_stale_copy():
    dest = Destination(name="hook", kind="webhook", url="https://hooks.example/x")
    DESTINATION.save(dest, by="ana", via="admin")
    first, second = Destination.objects.get(pk=dest.pk), Destination.objects.get(pk=dest.pk)
    first.enabled = False
    DESTINATION.save(first, by="ana", via="admin")
    second.kind = "git"  # still holds enabled=True, as it read it before the first edit
    DESTINATION.save(second, by="ben", via="admin")
    _, last = _records()[-1]
    assert last["before"]["enabled"] is False and last["before"]["kind"] == "webhook"
    assert last["changed"] == ["enabled", "kind"]


def test_recorded_under_the_worker_it_concerns_and_a_move_names_both():
    alpha, beta = worker_create("alpha"), worker_create("beta")
    grant = Grant(slug="docs", worker=alpha, host="docs.example")
    GRANT_EDITS.save(grant, by="ana", via="admin")
    grant.worker = beta
    GRANT_EDITS.save(grant, by="ana", via="admin")
    org_wide = Grant(slug="org", host="status.example")
    GRANT_EDITS.save(org_wide, by="ana", via="admin")
    GRANT_EDITS.delete(grant, by="ana", via="admin")
    (w1, created), (w2, moved), (w3, org), (w4, deleted) = _records()
    assert (w1, w2, w3, w4) == ("alpha", "beta", "", "beta")
    assert "moved_from_worker" not in created and moved["moved_from_worker"] == "alpha"
    assert org["name"] == "org" and deleted["before"]["worker"] == "beta"
    # the auditor's worker filter finds every edit of alpha's grant while it was alpha's
    assert AuditRecord.objects.filter(worker_name="alpha").count() == 1


def test_a_failed_record_undoes_the_edit(monkeypatch):
    def full(*_a, **_k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(edits, "audit_append", full)
    dest = Destination(name="hook", kind="webhook", url="https://hooks.example/x")
    with pytest.raises(RuntimeError, match="disk full"):
        DESTINATION.save(dest, by="ana", via="admin")
    assert not Destination.objects.exists() and not AuditRecord.objects.exists()


def test_a_bulk_delete_records_each_one_or_none():
    for name in ("a", "b", "c"):
        dest = Destination(name=name, kind="webhook", url="https://x.example/")
        DESTINATION.save(dest, by="ana", via="admin")
    real, calls = edits.audit_append, []

    def third_fails(*a, **k):
        calls.append(a)
        if len(calls) == 3:
            raise RuntimeError("disk full")
        return real(*a, **k)

    edits_before = AuditRecord.objects.count()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(edits, "audit_append", third_fails)
        with pytest.raises(RuntimeError):
            DESTINATION.delete_all(Destination.objects.order_by("name"), by="ana", via="admin")
    assert Destination.objects.count() == 3 and AuditRecord.objects.count() == edits_before
    DESTINATION.delete_all(Destination.objects.order_by("name"), by="ana", via="admin")
    assert not Destination.objects.exists()
    assert [d["name"] for _, d in _records()[-3:]] == ["a", "b", "c"]


def test_inside_a_callers_transaction_the_edit_rolls_back_with_it():
    with pytest.raises(RuntimeError), transaction.atomic():
        DESTINATION.save(Destination(name="hook", kind="webhook", url="https://x.example/"), by="a", via="b")
        raise RuntimeError("the caller's next step failed")
    assert not Destination.objects.exists() and not AuditRecord.objects.exists()
