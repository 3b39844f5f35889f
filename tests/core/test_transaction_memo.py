"""TransactionMemo: remembered for the rest of the transaction, forgotten at its end either way and with
a rolled-back savepoint it was set in; the audit chain's head and lock memos rely on exactly that."""

import pytest
from django.db import transaction

from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append
from controlplane.audit.verify import verify_database
from controlplane.core.db import TransactionMemo

pytestmark = pytest.mark.django_db(transaction=True)


def test_kept_for_the_transaction_and_forgotten_at_its_end():
    memo = TransactionMemo()
    with transaction.atomic():
        assert memo.get() is None
        memo.set("head")
        assert memo.get() == "head"
        with transaction.atomic():
            assert memo.get() == "head"  # a savepoint inside still sees it
    assert memo.get() is None  # committed: gone
    with pytest.raises(RuntimeError), transaction.atomic():
        memo.set("doomed")
        raise RuntimeError
    with transaction.atomic():
        assert memo.get() is None  # rolled back: gone, also in the next transaction


def test_a_rolled_back_savepoint_takes_its_value_with_it_and_a_released_one_keeps_it():
    memo = TransactionMemo()
    with transaction.atomic():
        memo.set("outer")
        with pytest.raises(RuntimeError), transaction.atomic():
            memo.set("inner")
            raise RuntimeError
        assert memo.get() is None  # never the rolled-back value, and not an older one either
        with transaction.atomic():
            memo.set("released")
        assert memo.get() == "released"


def test_another_callback_where_the_marker_was_is_not_mistaken_for_it():
    memo = TransactionMemo()
    with transaction.atomic():
        memo.set("first")
    with transaction.atomic():
        transaction.on_commit(lambda: None)  # the same place in a later transaction's callbacks
        assert memo.get() is None
    with transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():
            memo.set("inner")
            raise RuntimeError
        transaction.on_commit(lambda: None)  # takes the rolled-back marker's place
        assert memo.get() is None


def test_set_outside_a_transaction_remembers_nothing():
    memo = TransactionMemo()
    memo.set("loose")
    assert memo.get() is None
    with transaction.atomic():
        assert memo.get() is None


def test_the_chain_stays_whole_across_savepoints_that_roll_back_between_appends():
    with transaction.atomic():
        audit_append("decision", {"n": 1})
        with pytest.raises(RuntimeError), transaction.atomic():
            audit_append("decision", {"n": "rolled back"})
            raise RuntimeError
        audit_append("decision", {"n": 2})
        with transaction.atomic():
            audit_append("decision", {"n": 3})
        audit_append("decision", {"n": 4})
    audit_append("decision", {"n": 5})
    assert list(AuditRecord.objects.order_by("seq").values_list("seq", flat=True)) == [1, 2, 3, 4, 5]
    assert verify_database().ok
