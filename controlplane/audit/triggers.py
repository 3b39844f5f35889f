"""Database triggers that make the audit chain, the spend ledger and the model-call reservations
append-only: UPDATE, DELETE, TRUNCATE and every rewrite that goes through them are refused by the
database itself, whatever code runs. Used by the audit and ledger migrations.

Rewrite paths closed here, besides plain UPDATE and DELETE:
- SQLite `INSERT OR REPLACE` / `REPLACE` (and `.. OR REPLACE` on a secondary unique key) deletes the row
  it conflicts with without firing a DELETE trigger (unless recursive_triggers is on, which no sqlite3
  shell turns on): a BEFORE INSERT trigger refuses any insert whose key, or any of its unique keys, is
  already stored, so the conflict never reaches REPLACE.
- The purge escape. It used to be a connection-local SQL function (SQLite) or a session setting
  (PostgreSQL) that any connection could define or set for itself. Nothing in SQL can tell Roster's
  `flush` from anyone else's connection, so there is no escape: the triggers refuse always, and
  `manage.py flush` on a *test* database (Django's test runner empties tables between transactional
  tests) drops the triggers, empties the tables and puts them back, in one transaction.
- PostgreSQL `INSERT .. ON CONFLICT DO UPDATE`, `MERGE` and rules rewriting into UPDATE or DELETE fire the
  row triggers; `COPY FROM` only inserts (a conflicting row is a unique violation); TRUNCATE has its own
  statement trigger.
Whoever can drop or disable triggers (the tables' owner, a superuser) can still rewrite: the triggers stop
application code and mistakes; the hash chain and signed checkpoints are what detect a determined
tamperer."""

from __future__ import annotations

import contextlib

PG_FUNCTION = """
CREATE OR REPLACE FUNCTION roster_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% on % refused: the table is append-only', TG_OP, TG_TABLE_NAME;
END
$$;
CREATE OR REPLACE FUNCTION roster_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'TRUNCATE on % refused: the table is append-only', TG_TABLE_NAME;
END
$$;
"""

_SQLITE_TRIGGERS = ("no_update", "no_delete", "no_replace")
_PG_TRIGGERS = ("append_only", "no_truncate")


def unique_keys(connection, table: str) -> list[tuple[str, ...]]:
    """Every column set the table holds unique (its primary key included), as stored now."""
    with connection.cursor() as cur:
        constraints = connection.introspection.get_constraints(cur, table)
    keys: list[tuple[str, ...]] = []
    for info in constraints.values():
        columns = tuple(info["columns"] or ())
        if (info.get("unique") or info.get("primary_key")) and columns and columns not in keys:
            keys.append(columns)
    return sorted(keys)


def _sqlite_conflict_condition(table: str, keys: list[tuple[str, ...]]) -> str:
    tests = []
    for columns in keys:
        match = " AND ".join(f'"{c}" = NEW."{c}"' for c in columns)
        tests.append(f"EXISTS (SELECT 1 FROM {table} WHERE {match})")
    return " OR ".join(tests)


def create_sql(vendor: str, table: str, keys: list[tuple[str, ...]]) -> list[str]:
    """`keys`: the table's unique column sets (unique_keys), for SQLite's REPLACE guard."""
    if vendor == "sqlite":
        statements = [
            f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'UPDATE on {table} refused: the table is append-only'); END;",
            f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'DELETE on {table} refused: the table is append-only'); END;",
        ]
        if keys:
            statements.append(
                f"CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table} "
                f"WHEN {_sqlite_conflict_condition(table, keys)} "
                f"BEGIN SELECT RAISE(ABORT, 'INSERT over a stored row of {table} refused: "
                f"the table is append-only'); END;")
        return statements
    if vendor == "postgresql":
        return [
            PG_FUNCTION,
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION roster_refuse_change();",
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION roster_refuse_truncate();",
        ]
    raise RuntimeError(f"append-only triggers not implemented for {vendor}")


def drop_sql(vendor: str, table: str) -> list[str]:
    if vendor == "sqlite":
        return [f"DROP TRIGGER IF EXISTS {table}_{name};" for name in _SQLITE_TRIGGERS]
    return [f"DROP TRIGGER IF EXISTS {table}_{name} ON {table};" for name in _PG_TRIGGERS]


def install(connection, table: str) -> None:
    """(Re)create the table's triggers for its current unique keys."""
    with connection.cursor() as cur:
        for sql in drop_sql(connection.vendor, table) + create_sql(
                connection.vendor, table, unique_keys(connection, table)):
            cur.execute(sql)  # no parameters: the PL/pgSQL body has a literal %


def append_only_tables(connection) -> list[str]:
    """The tables that carry the append-only triggers, as the database says (not a list kept in code,
    so a table a later migration makes append-only is found too)."""
    with connection.cursor() as cur:
        if connection.vendor == "sqlite":
            cur.execute("SELECT tbl_name FROM sqlite_master WHERE type = 'trigger' "
                        "AND name = tbl_name || '_no_update' ORDER BY tbl_name")
        else:
            cur.execute("SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                        "WHERE t.tgname = c.relname || '_append_only' "
                        "AND c.relnamespace = to_regnamespace(current_schema()) ORDER BY c.relname")
        return [row[0] for row in cur.fetchall()]


@contextlib.contextmanager
def triggers_lifted(connection):
    """Only for `manage.py flush` of a test database (see the module docstring); the caller holds the
    transaction, so the triggers are back whether the flush committed or rolled back."""
    tables = append_only_tables(connection)
    with connection.cursor() as cur:
        for table in tables:
            for sql in drop_sql(connection.vendor, table):
                cur.execute(sql)
    yield tables
    for table in tables:
        install(connection, table)


def migration_ops(table: str):
    """Forward and backward RunPython callables for one table, per database vendor."""

    def forward(apps, schema_editor):
        install(schema_editor.connection, table)

    def backward(apps, schema_editor):
        for sql in drop_sql(schema_editor.connection.vendor, table):
            schema_editor.execute(sql, None)

    return forward, backward
