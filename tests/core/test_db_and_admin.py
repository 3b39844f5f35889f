"""core.db.in_transaction joins the caller's transaction without a savepoint (an expected error the
caller handles leaves its transaction usable) and opens one when there is none; core.admin.ReadOnlyAdmin
is the read-only admin of every record that changes only through services."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from controlplane.approvals.models import Approval
from controlplane.audit.models import AuditRecord, ModelTrace
from controlplane.core.admin import ReadOnlyAdmin
from controlplane.core.db import in_transaction
from controlplane.fleet.models import Run
from controlplane.ledger.models import SpendLine


@pytest.mark.django_db(transaction=True)
def test_opens_a_transaction_when_none_is_open():
    assert not connection.in_atomic_block
    with in_transaction():
        assert connection.in_atomic_block
    assert not connection.in_atomic_block


@pytest.mark.django_db(transaction=True)
def test_joins_the_callers_transaction_without_a_savepoint():
    with transaction.atomic():
        with CaptureQueriesContext(connection) as queries, in_transaction():
            pass
        assert not any("SAVEPOINT" in q["sql"].upper() for q in queries.captured_queries)
        with pytest.raises(LookupError), in_transaction():
            raise LookupError("handled by the caller")
        assert not connection.needs_rollback  # the caller's transaction goes on


@pytest.mark.parametrize("model", [Run, Approval, AuditRecord, ModelTrace, SpendLine])
def test_records_changed_only_through_services_are_read_only(model, rf):
    model_admin = admin.site._registry[model]
    assert isinstance(model_admin, ReadOnlyAdmin)
    request = rf.get("/")
    request.user = type("Superuser", (), {"is_active": True, "is_superuser": True,
                                          "has_perm": lambda *a: True})()
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)
