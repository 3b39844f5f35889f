"""Database helpers shared by the apps."""

from __future__ import annotations

import contextlib

from django.db import connection, transaction


def in_transaction():
    """The caller's transaction if one is open, else a new one. Never a savepoint: a savepoint costs two
    statements on every call on the decision path, and `atomic(savepoint=False)` would instead mark the
    caller's transaction as failed when an expected error (an unknown or already settled decision)
    passes through, though the caller handles it and goes on (an outcome batch does)."""
    if connection.in_atomic_block:
        return contextlib.nullcontext()
    return transaction.atomic()
