"""Audit records held for a group's one INSERT (controlplane.core.held_rows, used by
controlplane.egress.db_thread.as_group): hashed onto the chain when appended, written together at the
group's end, and following the group's transaction exactly: a savepoint that rolls back takes the
records appended inside it, a group that raises leaves nothing, and a record whose row is needed back has
the held ones written first, so rows stay in chain order. Also run on PostgreSQL, with prepared
statements and the pipeline (tests/integration/test_on_postgresql.py)."""

import contextlib

import pytest
from django.db import connection, transaction

from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append, audit_write
from controlplane.audit.verify import verify_database
from controlplane.core import held_rows
from controlplane.egress.db_thread import as_group

pytestmark = pytest.mark.django_db(transaction=True)

_TABLE = AuditRecord._meta.db_table


@contextlib.contextmanager
def _audit_inserts():
    """The INSERT statements into the audit table sent while the block runs."""
    seen: list[str] = []

    def wrapper(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("INSERT") and _TABLE in sql:
            seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield seen


def _stored() -> list[tuple[int, str]]:
    return [(seq, body) for seq, body in AuditRecord.objects.order_by("seq").values_list("seq", "body")]


def _names() -> list[str]:
    return [rec.body.split('"name":"')[1].split('"')[0] for rec in AuditRecord.objects.order_by("seq")]


def test_a_group_writes_its_records_in_one_insert_in_chain_order():
    audit_append("decision", {"name": "before"})
    with _audit_inserts() as inserts, as_group():
        for i in range(40):
            audit_write("decision", {"name": f"g{i}"})
        # nothing is written before the group's end: the records wait, hashed and linked
        assert inserts == []
    assert len(inserts) == 1
    assert _names() == ["before"] + [f"g{i}" for i in range(40)]
    assert [seq for seq, _ in _stored()] == list(range(1, 42))
    assert verify_database().ok


def test_more_records_than_one_statement_takes_go_in_several(monkeypatch):
    monkeypatch.setattr(held_rows, "ROWS_PER_STATEMENT", 7)
    with _audit_inserts() as inserts, as_group():
        for i in range(20):
            audit_write("decision", {"name": f"r{i}"})
    assert len(inserts) == 3  # 7 + 7 + 6
    assert _names() == [f"r{i}" for i in range(20)]
    assert verify_database().ok


def test_a_savepoint_rolled_back_takes_the_records_appended_inside_it():
    with as_group():
        audit_write("decision", {"name": "kept-1"})
        with contextlib.suppress(RuntimeError), transaction.atomic():
            audit_write("decision", {"name": "undone-1"})
            audit_write("decision", {"name": "undone-2"})
            raise RuntimeError("this job's own savepoint rolls back")
        audit_write("decision", {"name": "kept-2"})
    # the chain links kept-2 to kept-1: no gap, no record of the rolled-back savepoint
    assert _names() == ["kept-1", "kept-2"]
    assert [seq for seq, _ in _stored()] == [1, 2]
    assert verify_database().ok


def test_nested_savepoints_keep_exactly_what_committed():
    with as_group():
        audit_write("decision", {"name": "a"})
        with transaction.atomic():
            audit_write("decision", {"name": "b"})
            with contextlib.suppress(ValueError), transaction.atomic():
                audit_write("decision", {"name": "c"})
                raise ValueError("inner")
            audit_write("decision", {"name": "d"})
        with contextlib.suppress(ValueError), transaction.atomic():
            with transaction.atomic():
                audit_write("decision", {"name": "e"})  # released inside, then rolled back with its parent
            raise ValueError("outer")
        audit_write("decision", {"name": "f"})
    assert _names() == ["a", "b", "d", "f"]
    assert verify_database().ok


def test_a_group_that_raises_writes_nothing():
    audit_append("decision", {"name": "before"})
    with pytest.raises(RuntimeError), as_group():
        audit_write("decision", {"name": "lost-with-the-group"})
        raise RuntimeError("the group fails")
    assert _names() == ["before"]
    # and the next group links to the stored head, not to the record that was never written
    with as_group():
        audit_write("decision", {"name": "after"})
    assert _names() == ["before", "after"]
    assert verify_database().ok


def test_a_record_whose_row_is_needed_has_the_held_ones_written_first():
    with as_group():
        audit_write("decision", {"name": "held"})
        record = audit_append("decision", {"name": "needed"})
        audit_write("decision", {"name": "held-after"})
        held = AuditRecord.objects.get(seq=1)
        assert record.seq == 2 and held.pk < record.pk
    rows = list(AuditRecord.objects.order_by("seq").values_list("seq", "id"))
    assert [seq for seq, _ in rows] == [1, 2, 3]
    assert [pk for _, pk in rows] == sorted(pk for _, pk in rows)  # ids rise with seq
    assert _names() == ["held", "needed", "held-after"]
    assert verify_database().ok


def test_any_statement_on_the_table_sees_the_held_records_first():
    """A read of the table inside the group (the ORM's, anyone's) has the held records written before it,
    so it sees every record appended so far; the records after it are held again."""
    with _audit_inserts() as inserts, as_group():
        audit_write("decision", {"name": "one"})
        audit_write("decision", {"name": "two"})
        assert AuditRecord.objects.count() == 2
        assert len(inserts) == 1
        audit_write("decision", {"name": "three"})
        assert list(AuditRecord.objects.order_by("seq").values_list("seq", flat=True)) == [1, 2, 3]
        audit_write("decision", {"name": "four"})
    assert len(inserts) == 3
    assert _names() == ["one", "two", "three", "four"]
    assert verify_database().ok


def test_outside_a_group_every_record_is_written_when_appended():
    with _audit_inserts() as inserts, transaction.atomic():
        audit_write("decision", {"name": "one"})
        audit_write("decision", {"name": "two"})
        assert AuditRecord.objects.count() == 2
    assert len(inserts) == 2


def test_a_holding_block_inside_another_holds_into_the_outer_one():
    with _audit_inserts() as inserts, as_group():
        audit_write("decision", {"name": "outer"})
        with held_rows.holding(connection):
            audit_write("decision", {"name": "inner"})
        assert inserts == []  # the inner block's end wrote nothing of its own
    assert len(inserts) == 1
    assert _names() == ["outer", "inner"]
    assert verify_database().ok
