"""Counting what the decision service sends to the database, in-process and without changing it: a Django
execute wrapper times every statement, and wrapping the connection's commit and rollback times those and
closes the transaction's books. The audit chain head lock is seen as the statement that takes it
(pg_advisory_xact_lock on PostgreSQL; BEGIN IMMEDIATE on SQLite, whose write lock serialises the chain)
and counts as held until the commit or rollback. Thread-safe: each thread keeps its open transaction's
state, the totals are shared."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from django.db.backends.base.base import BaseDatabaseWrapper

IMPLICIT_BEGIN = "BEGIN (sent by psycopg before a transaction's first statement; time not seen)"


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0


class Capture:
    def __init__(self):
        self._local = threading.local()
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.per_sql: dict[str, list] = defaultdict(lambda: [0, 0.0])  # sql: [count, seconds]
            self.statements = self.finishes = self.begins = 0
            self.sql_seconds = 0.0
            self.lock_waits: list[float] = []
            self.lock_helds: list[float] = []

    def _state(self):
        state = self._local
        if not hasattr(state, "txn_start"):
            state.txn_start = state.lock_at = None
        return state

    def _record(self, sql: str, seconds: float, statement: bool = True) -> None:
        with self._lock:
            entry = self.per_sql[sql]
            entry[0] += 1
            entry[1] += seconds
            self.sql_seconds += seconds
            if statement:
                self.statements += 1

    def wrapper(self, execute, sql, params, many, context):
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            end = time.perf_counter()
            self._record(" ".join(sql.split()), end - start)
            state = self._state()
            first_word = sql.lstrip()[:5].upper()
            if state.txn_start is None and (first_word == "BEGIN" or context["connection"].in_atomic_block):
                state.txn_start = start
            if state.lock_at is None and (first_word == "BEGIN" or "pg_advisory_xact_lock" in sql):
                state.lock_at = end
                with self._lock:
                    self.lock_waits.append(end - start)

    def finished(self, connection, word: str, seconds: float) -> None:
        """A commit or rollback just returned."""
        end = time.perf_counter()
        state = self._state()
        self._record(word, seconds, statement=False)
        with self._lock:
            self.finishes += 1
            if connection.vendor == "postgresql" and state.txn_start is not None:
                self.begins += 1
                self.per_sql[IMPLICIT_BEGIN][0] += 1
            if state.lock_at is not None:
                self.lock_helds.append(end - state.lock_at)
        state.txn_start = state.lock_at = None

    def summary(self, items: int) -> dict:
        with self._lock:
            statement_list = [(sql, count / items, seconds / count * 1000)
                              for sql, (count, seconds) in self.per_sql.items()]
            return {
                "statements": self.statements / items,
                "round_trips": (self.statements + self.finishes + self.begins) / items,
                "transactions": self.finishes / items,
                "sql_ms": self.sql_seconds / items * 1000,
                "lock_wait_ms": sum(self.lock_waits) / items * 1000,
                "lock_wait_p99_ms": _p99(self.lock_waits) * 1000,
                "lock_held_ms": sum(self.lock_helds) / items * 1000,
                "lock_held_p99_ms": _p99(self.lock_helds) * 1000,
                "statement_list": statement_list,
            }


def install() -> Capture:
    """Wrap every connection's commit and rollback (the class's, so threads' connections too)."""
    capture = Capture()
    original_commit, original_rollback = BaseDatabaseWrapper.commit, BaseDatabaseWrapper.rollback

    def timed(original, word):
        def call(self):
            start = time.perf_counter()
            try:
                return original(self)
            finally:
                capture.finished(self, word, time.perf_counter() - start)
        return call

    BaseDatabaseWrapper.commit = timed(original_commit, "COMMIT")
    BaseDatabaseWrapper.rollback = timed(original_rollback, "ROLLBACK")
    return capture
