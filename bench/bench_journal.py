"""The run journal's cost per model call (docs/journal.md), side by side: the same chat completion call
through the real gateway and decision API with the grant's journal on (request and response captured,
masked, kept on disk, posted and stored content-addressed with its audit record) and off. Each call
carries a conversation history of HISTORY messages that grows by one message a call, as an agent's does,
so the content addressing shows: the bytes stored per call stay near the new message, not the history.

Latency is what the box sees (the journal is written after the response has passed, so it should add
little); "stored" is the journal's bodies' bytes over the calls, against the request bytes sent; "drain"
is how long after the last call the control plane had every call stored. `python -m bench journal` runs
only this; ROSTER_BENCH_JOURNAL_CALLS / _HISTORY set the sizes."""

from __future__ import annotations

import base64
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.bench_gateway import SERVICE_TOKEN, _control_plane_env, _prepare
from bench.bench_stream import PRICE
from tests.support import procs
from tests.support.gateway import gateway_process

CALLS = int(os.environ.get("ROSTER_BENCH_JOURNAL_CALLS", 60))
HISTORY = int(os.environ.get("ROSTER_BENCH_JOURNAL_HISTORY", 20))
ANSWER = json.dumps({"id": "chatcmpl-bench", "object": "chat.completion", "model": "bench-model",
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok " * 200},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 10, "completion_tokens": 200, "total_tokens": 210}}).encode()
SWITCH = """
import django; django.setup()
from controlplane.policy.models import Grant
Grant.objects.filter(slug="bench-upstream").update(journal={on})
"""
STORED = """
import django; django.setup()
from django.db.models import Sum
from controlplane.journal.models import JournalBody, JournalCall
print(JournalCall.objects.count(), JournalBody.objects.aggregate(s=Sum("size"))["s"] or 0)
"""


class _ModelHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)

    def log_message(self, *args):
        pass


def _body(n: int) -> bytes:
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: " + "word " * 80}
               for i in range(HISTORY + n)]
    return json.dumps({"model": "bench-model", "max_tokens": 200, "messages": history}).encode()


def _call(gateway_port: int, up_port: int, token: str, body: bytes) -> float:
    auth = base64.b64encode(f"run:{token}".encode()).decode()
    target = f"http://127.0.0.1:{up_port}/v1/chat/completions"
    request = (f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1:{up_port}\r\n"
               f"Proxy-Authorization: Basic {auth}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    with socket.create_connection(("127.0.0.1", gateway_port), timeout=30) as sock:
        started = time.perf_counter()
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        elapsed = (time.perf_counter() - started) * 1000
    if not data.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"model call refused: {data[:200]!r}")
    return elapsed


def _stored(env: dict) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", STORED], cwd=procs.REPO, env={**os.environ, **env},
                         check=True, capture_output=True, text=True)
    calls, size = out.stdout.split()
    return int(calls), int(size)


def _series(name: str, gw_port: int, up_port: int, token: str, env: dict, journaled: bool) -> dict:
    """The same calls (same bodies, in order) for each series, so only the journal differs."""
    offset = 0
    for i in range(3):
        _call(gw_port, up_port, token, _body(offset + i))  # warm up
    before_calls, before_bytes = _stored(env)
    sent, times = 0, []
    for i in range(CALLS):
        body = _body(offset + 3 + i)
        sent += len(body)
        times.append(_call(gw_port, up_port, token, body))
    done = time.perf_counter()
    calls, size = _stored(env)
    while journaled and calls - before_calls < CALLS and time.perf_counter() - done < 60:
        time.sleep(0.05)
        calls, size = _stored(env)
    # Each look is a Django process start (a few seconds here): an upper bound, not the drain itself.
    drain = (time.perf_counter() - done) * 1000
    times.sort()
    result = {"p50": statistics.median(times), "p95": times[int(len(times) * 0.95) - 1],
              "stored": (size - before_bytes) / CALLS, "sent": sent / CALLS, "calls": calls - before_calls,
              "drain": drain}
    print(f"  {name:<12} p50 {result['p50']:7.2f} ms  p95 {result['p95']:7.2f} ms  "
          f"request {result['sent'] / 1024:6.1f} KiB/call  stored {result['stored'] / 1024:6.1f} KiB/call  "
          f"({result['calls']} calls journaled{f'; all stored within {drain:.0f} ms' if journaled else ''})",
          flush=True)
    return result


def _switch(env: dict, on: bool) -> None:
    subprocess.run([sys.executable, "-c", SWITCH.format(on=on)], cwd=procs.REPO, env={**os.environ, **env},
                   check=True)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ModelHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    up_port = server.server_address[1]
    try:
        with tempfile.TemporaryDirectory(prefix="roster-bench-journal-") as tmpdir:
            tmp = Path(tmpdir)
            env = _control_plane_env(tmp)
            token = _prepare(env, up_port)
            subprocess.run([sys.executable, "-c", PRICE], cwd=procs.REPO, env={**os.environ, **env},
                           check=True)
            print(f"{CALLS} chat completion calls, one at a time, history from {HISTORY} messages growing "
                  f"by one a call; real gateway and decision API on loopback", flush=True)
            with procs.decision_api_server(env, tmp) as cp_url, gateway_process(
                    cp_url, SERVICE_TOKEN, tmp, allow_loopback_upstreams=True, quiet=True) as gw:
                procs.wait_for_http(cp_url + "/api/gateway/health", timeout=30)
                _switch(env, False)
                off = _series("journal off", gw.port, up_port, token, env, False)
                _switch(env, True)
                on = _series("journal on", gw.port, up_port, token, env, True)
    finally:
        server.shutdown()
        server.server_close()
    print(f"journal cost per model call: {on['p50'] - off['p50']:+.2f} ms p50, "
          f"{on['p95'] - off['p95']:+.2f} ms p95; stored {on['stored'] / max(on['sent'], 1):.2f}x of the "
          f"request bytes sent")
