"""What runs inside a verification worker process of verify_parallel.

Workers are forked from a fork server, never from the verifying process itself: that process may be a
threaded web server (the audit page's "verify"), and a child forked beside other threads inherits every
lock one of them held at that instant (SQLite's allocator mutex, a logging handler's) and can wait on it
forever, taking the verification with it. The fork server is a fresh single-threaded interpreter that
loads Django once (it preloads this module); each worker is forked from it and told which database to
read, because the verifying process's database (a test database, a DATABASE_URL given to one command)
need not be the one the settings module names."""

from __future__ import annotations

import django
from django.apps import apps
from django.conf import settings

if not apps.ready:  # in the fork server; a verifying process has set Django up long before
    django.setup()

_first_failed_range = None  # shared index of the earliest range known to be broken


def init(first_failed, database: dict, chunk_size: int) -> None:
    """A worker's start: the verifying process's database and chunk size, its own connection."""
    global _first_failed_range
    from django.db import connections

    _first_failed_range = first_failed
    settings.ROSTER_AUDIT_CHUNK_SIZE = chunk_size
    connections.settings["default"] = dict(database)
    try:
        del connections["default"]  # a connection object made for the settings module's database
    except AttributeError:
        pass


def scan_task(index: int, lo: int | None, hi: int | None, anchor):
    """Verify one seq range on its own; stop early once an earlier range is known to be broken."""
    from django.db import connections

    from controlplane.audit.verify_scan import scan_range

    shared = _first_failed_range
    try:
        span = scan_range(lo, hi, None, anchor, stop=lambda: shared.value < index)
        if span.problem is not None:
            with shared.get_lock():
                shared.value = min(shared.value, index)
        return span
    finally:
        connections.close_all()
