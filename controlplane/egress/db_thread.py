"""Where the gateway API's blocking work runs: its own database thread(s), each with a long-lived
connection, instead of a fresh thread (and connection) per request."""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import connection


def _healthy_connection_call(fn, *args):
    # Pool threads keep their database connection between calls (no connect per decision); one that
    # saw errors and no longer answers is dropped so the next call reconnects.
    if connection.connection is not None and connection.errors_occurred and not connection.is_usable():
        connection.close()
    return fn(*args)


# Every write here appends to the audit chain, which admits one writer at a time (SQLite's write lock,
# PostgreSQL's advisory lock), so more threads only add lock contention: on SQLite, threads that lose
# the lock back off in sleeps of up to 100 ms and can starve for seconds under load. One thread (its own
# long-lived connection) serves the requests in arrival order instead.
_db_executor = ThreadPoolExecutor(max_workers=settings.ROSTER_GATEWAY_DB_THREADS,
                                  thread_name_prefix="gateway-db")


async def in_pool(request, fn, *args):
    """Run blocking service code. Under ASGI (daphne) on the gateway API's own database thread(s):
    Django would otherwise start a fresh thread, and so a fresh database connection, for every
    request. Under WSGI (the test client) in the request's own thread, which already is that."""
    if isinstance(request, ASGIRequest):
        call = functools.partial(_healthy_connection_call, fn, *args)
        return await asyncio.get_running_loop().run_in_executor(_db_executor, call)
    return await sync_to_async(_healthy_connection_call, thread_sensitive=True)(fn, *args)
