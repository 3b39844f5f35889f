"""Database helpers shared by the apps."""

from __future__ import annotations

import contextlib
import threading

from django.db import connection, transaction


def in_transaction():
    """The caller's transaction if one is open, else a new one. Never a savepoint: a savepoint costs two
    statements on every call on the decision path, and `atomic(savepoint=False)` would instead mark the
    caller's transaction as failed when an expected error (an unknown or already settled decision)
    passes through, though the caller handles it and goes on (an outcome batch does)."""
    if connection.in_atomic_block:
        return contextlib.nullcontext()
    return transaction.atomic()


class TransactionMemo:
    """A value this thread's connection remembers for the rest of its current transaction: forgotten when
    the transaction ends either way, and when the savepoint it was set in rolls back. Validity rides on a
    no-op on-commit callback, which Django drops exactly then, so the memo can never outlive the state it
    describes (the audit chain's head, the chain lock held)."""

    def __init__(self):
        self._local = threading.local()

    def get(self):
        held = getattr(self._local, "held", None)
        if held is None or not connection.in_atomic_block:
            return None
        marker, value = held
        for _savepoints, callback, _robust in reversed(connection.run_on_commit):
            if callback is marker:
                return value
        self._local.held = None
        return None

    def set(self, value) -> None:
        def marker():
            pass

        transaction.on_commit(marker)
        self._local.held = (marker, value)

    def forget(self) -> None:
        self._local.held = None
