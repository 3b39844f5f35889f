"""Every statement form that could rewrite a stored row, against every append-only table: the database
refuses each one and every table reads as before. The table runs on SQLite here and on PostgreSQL in
tests/integration/test_on_postgresql.py (each database's own forms)."""

from __future__ import annotations

import io
from dataclasses import dataclass

import pytest
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from controlplane.audit import triggers
from controlplane.audit.services import audit_append
from controlplane.fleet.models import Worker
from controlplane.journal.models import JournalCall
from controlplane.ledger import services as ledger
from controlplane.ledger.models import ModelCallReservation


@dataclass(frozen=True)
class Table:
    name: str
    column: str  # a value an attacker would want changed
    value: str  # SQL literal it would be changed to
    keys: tuple[str, ...]  # every unique column (the primary key first)
    fresh: dict[str, str]  # SQL for a value no stored row holds, per unique column


TABLES = [
    Table("audit_auditrecord", "body", "'rewritten'", ("id", "seq", "hash"),
          {"id": "1000", "seq": "1000", "hash": "'" + "f" * 64 + "'"}),
    Table("ledger_spendline", "amount", "0", ("id",), {"id": "1000"}),
    Table("ledger_modelcallreservation", "micro", "0", ("id", "decision_id"),
          {"id": "1000", "decision_id": "'dc_fresh'"}),
    Table("journal_journalcall", "response_sha256", "''", ("id", "decision_id"),
          {"id": "1000", "decision_id": "'dc_fresh'"}),
]
REFUSED = "append-only"


def _columns(table: str) -> list[str]:
    with connection.cursor() as cur:
        return [col.name for col in connection.introspection.get_table_description(cur, table)]


def _copy_of_first_row(t: Table, *, keep_key: str | None, change: bool = True) -> str:
    """A SELECT of the table's first row with the attacked column changed and every unique column but
    `keep_key` fresh, so the insert it feeds conflicts on that key alone."""
    exprs = []
    for col in _columns(t.name):
        if change and col == t.column:
            exprs.append(t.value)
        elif col in t.fresh and col != keep_key:
            exprs.append(t.fresh[col])
        else:
            exprs.append(f'"{col}"')
    return f"SELECT {', '.join(exprs)} FROM {t.name} WHERE id = (SELECT min(id) FROM {t.name})"


def _column_list(t: Table) -> str:
    return ", ".join(f'"{c}"' for c in _columns(t.name))


def _run(cur, sql: str) -> None:
    cur.execute(sql)


def _fake_purge_function(cur, t: Table) -> None:
    # The old escape: a connection that defines the function the DELETE trigger asked.
    connection.connection.create_function("roster_purge_allowed", 0, lambda: 1)
    cur.execute(f"DELETE FROM {t.name}")


def _copy_conflicting_row(cur, t: Table) -> None:
    cur.execute(f"SELECT * FROM {t.name} ORDER BY id LIMIT 1")
    row = cur.fetchone()
    data = io.StringIO()
    data.write("\t".join("\\N" if v is None else str(v) for v in row) + "\n")
    statement = f"COPY {t.name} ({_column_list(t)}) FROM STDIN"
    with connection.wrap_database_errors, cur.cursor.copy(statement) as copy:
        copy.write(data.getvalue())


def _forms(vendor: str, t: Table):
    """(form name, builder) for this database; a builder, called with a database, gives the statement or
    a callable(cursor, table). Names come without a database (test ids)."""
    first = f"(SELECT min(id) FROM {t.name})"

    def copy(keep_key, change=True):
        select = _copy_of_first_row(t, keep_key=keep_key, change=change)
        return f"INSERT INTO {t.name} ({_column_list(t)}) {select}"

    forms = [
        ("update", lambda: f"UPDATE {t.name} SET {t.column} = {t.value}"),
        ("update one row", lambda: f"UPDATE {t.name} SET {t.column} = {t.value} WHERE id = {first}"),
        ("delete", lambda: f"DELETE FROM {t.name}"),
        ("delete one row", lambda: f"DELETE FROM {t.name} WHERE id = {first}"),
    ]
    if vendor == "sqlite":
        forms += [("update or replace", lambda: f"UPDATE OR REPLACE {t.name} SET {t.column} = {t.value}"),
                  ("delete under a self-defined roster_purge_allowed()", lambda: _fake_purge_function)]
        for key in t.keys:
            forms += [
                (f"insert or replace on {key}",
                 lambda key=key: copy(key).replace("INSERT INTO", "INSERT OR REPLACE INTO", 1)),
                (f"replace on {key}", lambda key=key: copy(key).replace("INSERT INTO", "REPLACE INTO", 1)),
                (f"upsert on {key}",
                 lambda key=key: copy(key, change=False)
                 + f" ON CONFLICT ({key}) DO UPDATE SET {t.column} = {t.value}"),
            ]
    else:
        forms += [
            # The seed's deferred foreign-key checks run first, as they would have in an attacker's own
            # connection (PostgreSQL refuses a TRUNCATE with pending trigger events for another reason).
            ("truncate", lambda: f"SET CONSTRAINTS ALL IMMEDIATE; TRUNCATE {t.name} CASCADE"),
            ("truncate after setting the old purge escape",
             lambda: "SET CONSTRAINTS ALL IMMEDIATE; SET LOCAL roster.allow_purge = 'on'; "
                     f"TRUNCATE {t.name} CASCADE"),
            ("writable CTE delete",
             lambda: f"WITH gone AS (DELETE FROM {t.name} RETURNING 1) SELECT count(*) FROM gone"),
            ("merge update", lambda: f"MERGE INTO {t.name} AS s USING (SELECT {first} AS id) AS x "
                                     f"ON s.id = x.id WHEN MATCHED THEN UPDATE SET {t.column} = {t.value}"),
            ("merge delete", lambda: f"MERGE INTO {t.name} AS s USING (SELECT {first} AS id) AS x "
                                     f"ON s.id = x.id WHEN MATCHED THEN DELETE"),
            ("rule rewriting an insert into an update",
             lambda: f"CREATE RULE roster_attack AS ON INSERT TO {t.name} DO INSTEAD "
                     f"UPDATE {t.name} SET {t.column} = {t.value}; {copy(None)}"),
            ("rule rewriting an insert into a delete",
             lambda: f"CREATE RULE roster_attack AS ON INSERT TO {t.name} DO INSTEAD "
                     f"DELETE FROM {t.name}; {copy(None)}"),
            ("copy from a conflicting row", lambda: _copy_conflicting_row),
        ]
        for key in t.keys:
            forms.append((f"insert on conflict ({key}) do update",
                          lambda key=key: copy(key, change=False)
                          + f" ON CONFLICT ({key}) DO UPDATE SET {t.column} = {t.value}"))
    return forms


def _cases():
    # This run's database only: the other's forms are not statements it could parse.
    vendor = "postgresql" if settings.DATABASES["default"]["ENGINE"].endswith("postgresql") else "sqlite"
    for t in TABLES:
        for name, _ in _forms(vendor, t):
            yield pytest.param(vendor, t, name, id=f"{vendor}-{t.name}-{name}")


def _seed() -> None:
    worker = Worker.objects.create(name="t")
    ledger.reserve(worker=worker, run=None, grant_slug="g", decision_id="dc_1", cost_micro=3, origin="human")
    for n in (1, 2):
        ModelCallReservation.objects.create(
            decision_id=f"dc_m{n}", model="m", input_estimate=10, max_output=10, tokens=20, micro=500,
            created_at=timezone.now())
    audit_append("decision", {"n": 2})
    for n in (1, 2):  # the run journal's model calls (controlplane.journal)
        JournalCall.objects.create(
            decision_id=f"dc_j{n}", run_id_ref=1, grant_slug="g", started_at=timezone.now(),
            ended_at=timezone.now(), method="POST", url="https://model.example/v1/chat/completions",
            request_sha256="a" * 64, request_size=2, status=200, response_sha256="b" * 64)


def _snapshot() -> dict[str, list[tuple]]:
    with connection.cursor() as cur:
        out = {}
        for t in TABLES:
            cur.execute(f"SELECT * FROM {t.name} ORDER BY id")
            out[t.name] = cur.fetchall()
        return out


@pytest.mark.django_db
@pytest.mark.parametrize(("vendor", "table", "form"), list(_cases()))
def test_every_rewrite_form_is_refused(vendor, table, form):
    assert connection.vendor == vendor
    _seed()
    statement = dict(_forms(vendor, table))[form]()
    before = _snapshot()
    assert all(before.values()), before
    with pytest.raises(DatabaseError) as err, transaction.atomic(), connection.cursor() as cur:
        statement(cur, table) if callable(statement) else _run(cur, statement)
    expected = ("duplicate key",) if form == "copy from a conflicting row" else (REFUSED,)
    assert any(text in str(err.value) for text in expected), str(err.value)
    assert _snapshot() == before


@pytest.mark.django_db
def test_every_unique_key_of_every_append_only_table_is_in_the_table():
    assert triggers.append_only_tables(connection) == sorted(t.name for t in TABLES)
    for t in TABLES:
        assert sorted(triggers.unique_keys(connection, t.name)) == sorted((k,) for k in t.keys)


@pytest.mark.django_db
def test_appends_still_work_including_insert_or_replace_of_a_new_row():
    _seed()
    t = TABLES[1]
    stored = len(_snapshot()[t.name])
    with connection.cursor() as cur:
        verb = "INSERT OR REPLACE" if connection.vendor == "sqlite" else "INSERT"
        cur.execute(f"{verb} INTO {t.name} ({_column_list(t)}) {_copy_of_first_row(t, keep_key=None)}")
    assert len(_snapshot()[t.name]) == stored + 1
