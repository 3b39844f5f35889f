"""Database triggers that make the audit chain and the spend ledger append-only (UPDATE and DELETE are
refused by the database itself, whatever code runs). Used by the audit and ledger migrations.

The one sanctioned exception is `manage.py flush` against a *test* database (Django's test runner
empties tables between transactional tests): on SQLite it deletes rows, so the DELETE trigger asks the
connection-local function roster_purge_allowed(), which is true only inside that command. A connection
that never registered the function (sqlite3 shell, another program) gets an error: still refused.
On PostgreSQL flush uses TRUNCATE: a statement trigger refuses it unless the session set
roster.allow_purge (only that command does). Whoever can drop triggers can do this too: the triggers
stop application code and mistakes; the hash chain is what detects a determined tamperer."""

from __future__ import annotations

import contextlib
import threading

_state = threading.local()

PG_FUNCTION = """
CREATE OR REPLACE FUNCTION roster_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% on % refused: the table is append-only', TG_OP, TG_TABLE_NAME;
END
$$;
CREATE OR REPLACE FUNCTION roster_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('roster.allow_purge', true), '') <> 'on' THEN
        RAISE EXCEPTION 'TRUNCATE on % refused: the table is append-only', TG_TABLE_NAME;
    END IF;
    RETURN NULL;
END
$$;
"""


def purge_allowed() -> int:
    return 1 if getattr(_state, "purging", False) else 0


@contextlib.contextmanager
def allow_purge(connection):
    _state.purging = True
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("SET roster.allow_purge = 'on'")
    try:
        yield
    finally:
        _state.purging = False
        if connection.vendor == "postgresql":
            with connection.cursor() as cur:
                cur.execute("RESET roster.allow_purge")


def register_sqlite_functions(connection) -> None:
    if connection.vendor == "sqlite":
        connection.connection.create_function("roster_purge_allowed", 0, purge_allowed)


def create_sql(vendor: str, table: str) -> list[str]:
    if vendor == "sqlite":
        return [
            f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'UPDATE on {table} refused: the table is append-only'); END;",
            f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} WHEN roster_purge_allowed() = 0 "
            f"BEGIN SELECT RAISE(ABORT, 'DELETE on {table} refused: the table is append-only'); END;",
        ]
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
        return [f"DROP TRIGGER IF EXISTS {table}_no_update;", f"DROP TRIGGER IF EXISTS {table}_no_delete;"]
    return [f"DROP TRIGGER IF EXISTS {table}_append_only ON {table};",
            f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table};"]


def migration_ops(table: str):
    """Forward and backward RunPython callables for one table, per database vendor."""

    def forward(apps, schema_editor):
        for sql in create_sql(schema_editor.connection.vendor, table):
            schema_editor.execute(sql, None)

    def backward(apps, schema_editor):
        for sql in drop_sql(schema_editor.connection.vendor, table):
            schema_editor.execute(sql, None)

    return forward, backward
