"""Rows a group of decisions (controlplane.egress.db_thread) appends, held until the group's end and then
written with one multi-row INSERT per table: the group's audit records (hashed onto the chain when
appended, as always; only the INSERT waits), its spend lines and its run decisions. A group's jobs
append five or six such rows per allowed request; one statement per table for all of them costs a
fraction of one statement each (docs/operations.md, "Group commit").

Held rows are part of the group's transaction and follow its fate exactly:
- `holding()` writes every held row before the block ends, so the commit after it finds them stored; a
  block that raises writes none (its transaction rolls back anyway).
- A savepoint inside the group that rolls back (a job's own `transaction.atomic()`) takes the rows held
  inside it, as it would rows already inserted: each held row rides on a no-op on-commit callback, which
  Django drops exactly then, so the rows still held are those whose callback is still in place (the
  mechanism of controlplane.core.db.TransactionMemo).
- Nothing reads a table while rows of it are held: any other statement that names the table (a ledger
  total, a settle's lookup, the ORM's, anyone's) has the table's held rows written first, by an execute
  wrapper on the connection for the block, and an appender that needs its row's id back calls
  `write_now()` first. So every statement sees every row as if each had been inserted when appended,
  and rows are stored in the order they were appended."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

# Rows per INSERT: well under SQLite's limit of bound parameters per statement (32766), whatever the table.
ROWS_PER_STATEMENT = 200

_here = threading.local()


class HeldTable:
    """One table's INSERT, for rows held in a holding() block: `prefix` is "INSERT INTO t (cols) VALUES ",
    `row_values` one row's placeholders, "(%s, %s, ...)"."""

    def __init__(self, table: str, prefix: str, row_values: str):
        if table not in prefix:
            raise ValueError(f"the INSERT for held rows of {table} must name it")
        self.table = table
        self.prefix = prefix
        self.row_values = row_values

    def hold(self, conn, *rows: list) -> bool:
        """Hold rows (each its parameters in the INSERT's column order) for the block's INSERT; False, and
        nothing held, when no holding() block is open on this thread's transaction (the caller inserts
        them now)."""
        held = _open_block()
        if held is None or not conn.in_atomic_block:
            return False
        table_rows = held.setdefault(self, [])
        for params in rows:
            def marker():
                pass

            conn.on_commit(marker)
            table_rows.append((marker, len(conn.run_on_commit) - 1, params))
        return True

    def last(self, conn) -> list | None:
        """The parameters of the newest row held and still standing, or None when none is."""
        rows = self._surviving(conn)
        return rows[-1][2] if rows else None

    def write_now(self, conn) -> None:
        """Write this table's held rows now, in the order they were held (before a read of the table)."""
        held = _open_block()
        if not held or self not in held:
            return
        rows = self._surviving(conn)
        del held[self]
        if not rows:
            return
        with conn.cursor() as cur:
            for start in range(0, len(rows), ROWS_PER_STATEMENT):
                chunk = rows[start:start + ROWS_PER_STATEMENT]
                cur.execute(self.prefix + ", ".join([self.row_values] * len(chunk)),
                            [value for _marker, _index, params in chunk for value in params])

    def _surviving(self, conn) -> list[tuple]:
        """The held rows whose savepoints still stand: a rollback drops a suffix of the on-commit
        callbacks, so it drops a suffix of these rows too."""
        held = _open_block()
        rows = held.get(self) if held else None
        if not rows:
            return []
        callbacks = conn.run_on_commit
        while rows:
            marker, index, _params = rows[-1]
            if conn.in_atomic_block and index < len(callbacks) and callbacks[index][1] is marker:
                break
            rows.pop()
        return rows


def _open_block() -> dict | None:
    return getattr(_here, "held", None)


@contextlib.contextmanager
def holding(conn) -> Iterator[None]:
    """Inside a transaction: rows the block's appenders hold are written at its end, one INSERT per table
    (in the order each table's first row was held). A block inside another holds into the outer one."""
    if _open_block() is not None:
        yield
        return
    _here.held = {}
    try:
        with conn.execute_wrapper(_write_before_other_statements(conn)):
            yield
            for table in list(_here.held):
                table.write_now(conn)
    finally:
        _here.held = None


def _write_before_other_statements(conn):
    def wrapper(execute, sql, params, many, context):
        held = _here.held
        if held:
            for table in [t for t in held if t.table in sql and not sql.startswith(t.prefix)]:
                table.write_now(conn)
        return execute(sql, params, many, context)
    return wrapper
