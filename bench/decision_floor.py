"""The floors under the decision bench (bench/bench_decision.py): what this machine gives before any
decision work is done, so its table shows how far a target is from what the hardware allows.

- `app`: an ASGI app that reads the request body, parses its JSON and answers a constant allow: the
  decision API's HTTP stack (same uvicorn, uvloop, httptools, same load client) with no decision behind it.
- `durable_commits`: one-row transactions committed one after another on the bench's database, with the
  settings the control plane runs on (SQLite's WAL and synchronous level, PostgreSQL with fsync on):
  the least a durable decision can wait for when no other decision shares its commit."""

from __future__ import annotations

import json
import time

_ANSWER = json.dumps({"verdict": "allow", "reason": "granted", "decision_id": "floor"}).encode()


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    json.loads(body or b"{}")
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json; charset=utf-8"),
                            (b"content-length", str(len(_ANSWER)).encode())]})
    await send({"type": "http.response.body", "body": _ANSWER})


def durable_commits(total: int, warmup: int) -> list[float]:
    """Runs in a child process with Django set up: ms per one-row transaction, BEGIN to COMMIT."""
    from django.db import connection, transaction

    with connection.cursor() as cur:
        cur.execute("CREATE TABLE bench_commit_floor (id integer PRIMARY KEY, body text NOT NULL)")
    latencies = []
    for i in range(warmup + total):
        start = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("INSERT INTO bench_commit_floor (id, body) VALUES (%s, %s)", [i, "x" * 600])
        if i >= warmup:
            latencies.append((time.perf_counter() - start) * 1000)
    return latencies
