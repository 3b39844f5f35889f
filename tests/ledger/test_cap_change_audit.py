"""A cap change is its own kind of audit record, carrying the value before and after."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from controlplane.audit.models import AuditRecord
from controlplane.fleet.services import worker_create
from controlplane.ledger import caps
from controlplane.ledger.models import Cap, Unit, Window


def _records():
    return [json.loads(r.body) for r in AuditRecord.objects.filter(kind="cap_change").order_by("seq")]


@pytest.mark.django_db
def test_create_change_delete_each_record_old_and_new():
    admin = get_user_model().objects.create_user("ada")
    worker = worker_create(name="capped")
    cap = caps.cap_save(Cap(worker=worker, unit=Unit.REQUESTS, window=Window.DAY, limit=100), admin)
    cap.limit = 10_000
    caps.cap_save(cap, admin)
    caps.cap_delete(Cap.objects.get(pk=cap.pk), admin)
    created, changed, deleted = (r["data"] if "data" in r else r for r in _records())
    assert created["event"] == "created" and created["old"] is None and created["new"]["limit"] == 100
    assert changed["event"] == "changed"
    assert changed["old"]["limit"] == 100 and changed["new"]["limit"] == 10_000
    assert changed["new"]["unit"] == "requests" and changed["by"] == "ada"
    assert deleted["event"] == "deleted" and deleted["old"]["limit"] == 10_000 and deleted["new"] is None
    assert not AuditRecord.objects.filter(kind="grant_change").exists()
