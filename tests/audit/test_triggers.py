"""The database refuses UPDATE and DELETE on audit records and spend lines, whatever code asks."""

from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from controlplane.audit import triggers
from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append
from controlplane.fleet.models import Worker
from controlplane.ledger import services as ledger
from controlplane.ledger.models import SpendLine


def _raw(sql, params=()):
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(sql, params)


@pytest.mark.django_db
@pytest.mark.parametrize("sql", [
    "UPDATE audit_auditrecord SET body = 'x'",
    "UPDATE audit_auditrecord SET verdict = 'allow' WHERE seq = 1",
    "DELETE FROM audit_auditrecord",
    "DELETE FROM audit_auditrecord WHERE seq = 1",
    "UPDATE ledger_spendline SET amount = 0",
    "DELETE FROM ledger_spendline",
])
def test_raw_sql_update_and_delete_are_refused(sql):
    worker = Worker.objects.create(name="t")
    ledger.reserve(worker=worker, run=None, grant_slug="g", decision_id="dc_1", cost_micro=3, origin="human")
    before_audit = list(AuditRecord.objects.values_list("seq", "body", "hash"))
    before_lines = list(SpendLine.objects.values_list("id", "amount"))
    with pytest.raises(DatabaseError, match="append-only"):
        _raw(sql)
    assert list(AuditRecord.objects.values_list("seq", "body", "hash")) == before_audit
    assert list(SpendLine.objects.values_list("id", "amount")) == before_lines


@pytest.mark.django_db
def test_orm_save_and_delete_are_refused():
    rec = audit_append("decision", {"a": 1})
    rec.body = rec.body.replace('"a":1', '"a":2')
    with pytest.raises(DatabaseError), transaction.atomic():
        rec.save()
    with pytest.raises(DatabaseError), transaction.atomic():
        AuditRecord.objects.all().delete()
    with pytest.raises(DatabaseError), transaction.atomic():
        AuditRecord.objects.update(kind="x")
    assert AuditRecord.objects.get().body.count('"a":1') == 1


@pytest.mark.django_db
def test_inserts_still_work_after_refusals():
    audit_append("decision", {})
    with pytest.raises(DatabaseError), transaction.atomic():
        AuditRecord.objects.all().delete()
    audit_append("decision", {})
    audit_append("decision", {})
    assert list(AuditRecord.objects.values_list("seq", flat=True)) == [1, 2, 3]


@pytest.mark.django_db(transaction=True)
def test_flush_outside_test_database_is_refused(settings):
    audit_append("decision", {})
    name = connection.settings_dict["NAME"]
    try:
        connection.settings_dict["NAME"] = "roster-production"
        # Same open connection, but flush no longer sees a test database: the triggers refuse.
        with pytest.raises(Exception, match="couldn't be flushed") as err:
            call_command("flush", interactive=False, verbosity=0)
        assert "append-only" in str(err.value.__cause__)
    finally:
        connection.settings_dict["NAME"] = name
    assert AuditRecord.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_flush_of_the_test_database_empties_the_tables():
    audit_append("decision", {})
    call_command("flush", interactive=False, verbosity=0)
    assert AuditRecord.objects.count() == 0
    # The flush lifted the triggers for itself only: they are back, for every append-only table.
    assert triggers.append_only_tables(connection) == [
        "audit_auditrecord", "journal_journalcall", "ledger_modelcallreservation", "ledger_spendline"]
    audit_append("decision", {})
    with pytest.raises(DatabaseError, match="append-only"):
        _raw("DELETE FROM audit_auditrecord")


@pytest.mark.django_db(transaction=True)
def test_a_failed_flush_leaves_the_triggers_in_place(monkeypatch):
    from django.core.management.commands import flush as django_flush

    audit_append("decision", {})
    monkeypatch.setattr(django_flush, "sql_flush", lambda *a, **k: ["DELETE FROM no_such_table"])
    with pytest.raises(Exception, match="couldn't be flushed"):
        call_command("flush", interactive=False, verbosity=0)
    assert len(triggers.append_only_tables(connection)) == 4
    with pytest.raises(DatabaseError, match="append-only"):
        _raw("DELETE FROM audit_auditrecord")
    assert AuditRecord.objects.count() == 1


@pytest.mark.django_db
def test_migrating_replaces_the_old_purge_escape_on_sqlite():
    if connection.vendor != "sqlite":
        pytest.skip("the old escape on PostgreSQL was a session setting: see test_rewrite_paths")
    table = "ledger_spendline"
    with connection.cursor() as cur:
        for sql in triggers.drop_sql("sqlite", table):
            cur.execute(sql)
        # The trigger as migrations before 0006 made it.
        cur.execute(f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
                    "WHEN roster_purge_allowed() = 0 BEGIN SELECT RAISE(ABORT, 'refused: append-only'); END;")
    forward, _ = triggers.migration_ops(table)
    forward(None, SimpleNamespace(connection=connection))
    with connection.cursor() as cur:
        cur.execute("SELECT group_concat(sql) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s",
                    [table])
        sql = cur.fetchone()[0]
    assert "roster_purge_allowed" not in sql and f"{table}_no_replace" in sql


@pytest.mark.django_db
def test_truncate_is_refused_on_postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no TRUNCATE (it is DELETE, covered above)")
    audit_append("decision", {})
    with pytest.raises(DatabaseError, match="append-only"):
        _raw("TRUNCATE audit_auditrecord")
    assert AuditRecord.objects.count() == 1
