"""Database helpers shared by the apps."""

from __future__ import annotations

import contextlib
import threading

from django.db import DEFAULT_DB_ALIAS, connections, transaction


def current_connection():
    """This thread's connection, looked up once. `django.db.connection` looks it up again on every
    attribute it is asked for (a thread-local lookup each time), which the decision path would pay some
    forty times per decision (docs/operations.md, "Benchmarks")."""
    return connections[DEFAULT_DB_ALIAS]


def in_transaction(conn=None):
    """The caller's transaction if one is open, else a new one. Never a savepoint: a savepoint costs two
    statements on every call on the decision path, and `atomic(savepoint=False)` would instead mark the
    caller's transaction as failed when an expected error (an unknown or already settled decision)
    passes through, though the caller handles it and goes on (an outcome batch does)."""
    if (conn or current_connection()).in_atomic_block:
        return contextlib.nullcontext()
    return transaction.atomic()


class TransactionMemo:
    """A value this thread's connection remembers for the rest of its current transaction: forgotten when
    the transaction ends either way, and when the savepoint it was set in rolls back. Validity rides on a
    no-op on-commit callback, which Django drops exactly then, so the memo can never outlive the state it
    describes (the audit chain's head, the chain lock held)."""

    def __init__(self):
        self._local = threading.local()

    def get(self, conn=None):
        """`conn`: this thread's connection when the caller has it at hand (each lookup costs)."""
        held = getattr(self._local, "held", None)
        if held is None:
            return None
        conn = conn or current_connection()
        marker, index, value = held
        # Callbacks are only ever appended, or dropped from the end when a savepoint rolls back, and the
        # list is emptied when the transaction ends: the marker is still where it was put exactly while
        # the state it vouches for stands.
        callbacks = conn.run_on_commit
        if conn.in_atomic_block and index < len(callbacks) and callbacks[index][1] is marker:
            return value
        self._local.held = None
        return None

    def set(self, value, conn=None) -> None:
        conn = conn or current_connection()
        if not conn.in_atomic_block:  # outside a transaction there is nothing to remember it for
            self._local.held = None
            return

        def marker():
            pass

        conn.on_commit(marker)
        self._local.held = (marker, len(conn.run_on_commit) - 1, value)

    def forget(self) -> None:
        self._local.held = None


@contextlib.contextmanager
def pipelined(conn=None):
    """Inside a transaction on PostgreSQL with server-side binding (the decision API's process): the
    statements of the block are sent without waiting for each one's answer (psycopg's pipeline mode);
    a statement whose result is read (a SELECT, a RETURNING) still waits, so a decision's writes, which
    read nothing back, reach the server together. The server runs them in order, exactly as sent; the
    first one that fails makes the block raise at its end at the latest (and skips the rest), inside the
    caller's transaction, which then rolls back: nothing is committed that was not confirmed. Elsewhere
    (SQLite, client-side binding, no transaction) the statements run one by one as usual."""
    conn = conn or current_connection()
    if (conn.vendor != "postgresql" or not conn.in_atomic_block
            or not conn.settings_dict.get("OPTIONS", {}).get("server_side_binding")):
        yield
        return
    conn.ensure_connection()
    with conn.connection.pipeline():
        yield
