"""On SQLite, the decision API's processes (--processes) take turns at the database's write lock through a
file lock beside the database, held by a process's database thread for one turn of its work (a group and
the jobs around it: controlplane.egress.db_thread).

Why: SQLite's own wait for its write lock is a busy timeout that polls, sleeping 1, 2, 5, ... up to 100 ms
between tries, so a process that finds the lock taken often sleeps long after it was released (measured:
two processes gave fewer decisions per second than one, p99 in the hundreds of ms). flock waits in the
kernel and wakes the next process the moment the lock is let go. It only orders the decision API's
processes among themselves; the chain's correctness never rests on it (every write transaction still
takes SQLite's write lock at BEGIN IMMEDIATE, and other processes, the web server and Celery, never take
this file lock). PostgreSQL: nothing here, its advisory lock already wakes the next waiter at once."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from django.db import connection

_opened: dict[str, int] = {}  # lock file path -> its descriptor (the database thread's only)


def _lock_fd() -> int | None:
    name = str(connection.settings_dict.get("NAME") or "")
    if not name or name == ":memory:" or name.startswith("file:"):
        return None
    path = name + ".decisions.lock"
    fd = _opened.get(path)
    if fd is None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        _opened[path] = fd
    return fd


@contextlib.contextmanager
def turn() -> Iterator[None]:
    """This process's turn at SQLite's write lock among the decision API's processes (no-op elsewhere)."""
    fd = _lock_fd() if connection.vendor == "sqlite" else None
    if fd is None:
        yield
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
