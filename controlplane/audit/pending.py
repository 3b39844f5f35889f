"""Audit records appended by a group of decisions (controlplane.egress.db_thread), held until the group's
commit and then written in one statement: each record is hashed onto the chain when it is appended, as
always, and only its INSERT waits. A group's jobs append three records per allowed request; one
multi-row INSERT for all of them costs a fraction of one statement each (docs/operations.md,
"Group commit").

The held records are part of the group's transaction and follow its fate exactly:
- `holding()` writes them all before the block ends, so the commit after it finds them stored; a block
  that raises writes none (the transaction rolls back anyway).
- A savepoint inside the group that rolls back (a job's own `transaction.atomic()`) takes the records
  appended inside it with it, as it would rows already inserted: each held record rides on a no-op
  on-commit callback, which Django drops exactly then, so the records still held are those whose
  callback is still in place (the mechanism of controlplane.core.db.TransactionMemo).
- The chain's head while records are held is the newest one still held: the next record links to it.
- An appender that needs its record's row back (audit_append) has the held records written first, so
  rows are stored in chain order, ids rising with seq."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

# Rows per INSERT: well under SQLite's limit of bound parameters per statement (32766; each row binds 10).
_ROWS_PER_STATEMENT = 200

_here = threading.local()


class _Held:
    """The records a holding() block has appended and not yet written, each with its savepoint marker."""

    def __init__(self):
        self.rows: list[tuple] = []  # (marker, index in run_on_commit, row parameters in INSERT order)

    def add(self, conn, params: list) -> None:
        def marker():
            pass

        conn.on_commit(marker)
        self.rows.append((marker, len(conn.run_on_commit) - 1, params))

    def surviving(self, conn) -> list[tuple]:
        """The held rows whose savepoints still stand (a rollback drops a suffix of the callbacks, so it
        drops a suffix of these rows too)."""
        callbacks = conn.run_on_commit
        rows = self.rows
        while rows:
            marker, index, _params = rows[-1]
            if conn.in_atomic_block and index < len(callbacks) and callbacks[index][1] is marker:
                break
            rows.pop()
        return rows


def _held() -> _Held | None:
    return getattr(_here, "held", None)


def held_head(conn) -> tuple[int, str] | None:
    """(seq, hash) of the newest record held and still standing, or None when none is."""
    held = _held()
    if held is None:
        return None
    rows = held.surviving(conn)
    if not rows:
        return None
    params = rows[-1][2]
    return params[0], params[-1]  # seq is the first column, hash the last (see services._INSERT_COLUMNS)


def hold(conn, params: list) -> bool:
    """Hold one record's row (in INSERT column order) for the group's one INSERT; False when no
    holding() block is open on this thread (the caller inserts it now)."""
    held = _held()
    if held is None or not conn.in_atomic_block:
        return False
    held.add(conn, params)
    return True


def write_held(conn, insert_prefix: str, row_values: str) -> None:
    """Write every record still held, in chain order, in as few statements as the parameter limit
    allows; nothing stays held afterwards."""
    held = _held()
    if held is None:
        return
    rows = held.surviving(conn)
    held.rows = []
    with conn.cursor() as cur:
        for start in range(0, len(rows), _ROWS_PER_STATEMENT):
            chunk = rows[start:start + _ROWS_PER_STATEMENT]
            cur.execute(insert_prefix + ", ".join([row_values] * len(chunk)),
                        [value for _marker, _index, params in chunk for value in params])


@contextlib.contextmanager
def holding(conn, insert_prefix: str, row_values: str) -> Iterator[None]:
    """Inside a transaction: records appended in the block are held and written together at its end.
    Not nested: a block inside another holds into the outer one."""
    if _held() is not None:
        yield
        return
    _here.held = _Held()
    try:
        yield
        write_held(conn, insert_prefix, row_values)
    finally:
        _here.held = None
