"""Streamed model answers: time to first token and streamed throughput, side by side for the box talking
to the upstream directly (no proxy), through plain `mitmdump` set to stream, and through the Roster
gateway (full decision path; the call is metered: a price, a token cap, `include_usage` asked for
upstream and its chunk removed, usage settled). The gateway is also measured with an instant decision
API stand-in (bench.gateway_servers' "instant-cp"), which isolates its own streaming cost from the decision
round trip: the call is still metered in the gateway (usage asked for and its chunk removed); and once
more with that stand-in injecting a secret, as a model API key is, so every streamed piece is also
scrubbed for its echoes (the usual case for a model call).

The upstream is a local SSE server speaking OpenAI chat completions: it answers after headers with the
first event at once, then EVENTS events as fast as it can write them, each its own write. TTFT is from
sending the request to the first event's bytes at the client; throughput is events per second from the
first event to the last. Targets: TTFT added <= 3 ms p50 over streaming mitmdump (issue 28), throughput
>= 0.9x.
`python -m bench stream` runs only this; ROSTER_BENCH_STREAM_RUNS / _EVENTS set the sizes."""

from __future__ import annotations

import base64
import contextlib
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
from bench.gateway_servers import helper
from tests.support import procs
from tests.support.gateway import MITMDUMP, gateway_process

RUNS = int(os.environ.get("ROSTER_BENCH_STREAM_RUNS", 100))  # enough for a steady p50 on a shared machine
EVENTS = int(os.environ.get("ROSTER_BENCH_STREAM_EVENTS", 400))
PRICE = """
import django; django.setup()
from controlplane.ledger.models import Cap, ModelPrice
ModelPrice.objects.create(pattern="bench-*", input_micro_per_million=1, cached_input_micro_per_million=1,
                          output_micro_per_million=1, max_output_tokens=4096)
Cap.objects.create(worker=None, unit="tokens", window="all", limit=10**15)
"""


def _chunk(doc: dict) -> bytes:
    return b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n"


class _SseHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        include = (body.get("stream_options") or {}).get("include_usage") is True
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": "bench-model"}
        for i in range(EVENTS):
            event = _chunk({**base, "choices": [{"index": 0, "delta": {"content": f"tok{i} "}}],
                            **({"usage": None} if include else {})})
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        tail = [_chunk({**base, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": EVENTS}})
                ] if include else []
        for event in [*tail, b"data: [DONE]\n\n"]:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def log_message(self, *args):
        pass


def _request(port: int, token: str | None) -> bytes:
    body = json.dumps({"model": "bench-model", "stream": True, "max_tokens": EVENTS,
                       "messages": [{"role": "user", "content": "go"}]}).encode()
    auth = ""
    if token:
        auth = "Proxy-Authorization: Basic " + base64.b64encode(f"run:{token}".encode()).decode() + "\r\n"
    target = f"http://127.0.0.1:{port}/v1/chat/completions"
    return (f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def _one(via_port: int, request: bytes) -> tuple[float, float, int]:
    """(TTFT ms, events/s, events seen) for one streamed answer."""
    with socket.create_connection(("127.0.0.1", via_port), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter()
        sock.sendall(request)
        first = None
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
            if first is None and b"data: " in data:
                first = time.perf_counter()
        ended = time.perf_counter()
    events = data.count(b"tok")
    if first is None or events < EVENTS or b"[DONE]" not in data:
        raise RuntimeError(f"incomplete stream: {events} of {EVENTS} events")
    return (first - started) * 1000, events / max(ended - first, 1e-9), events


def _measure(name: str, via_port: int, request: bytes) -> dict:
    for _ in range(3):
        _one(via_port, request)  # warm up connections and caches
    results = [_one(via_port, request) for _ in range(RUNS)]
    ttft = statistics.median(r[0] for r in results)
    rate = statistics.median(r[1] for r in results)
    print(f"  {name:<36} TTFT p50 {ttft:7.2f} ms   {rate:9.0f} events/s", flush=True)
    return {"ttft": ttft, "rate": rate}


@contextlib.contextmanager
def _streaming_mitmdump(tmp: Path):
    port = procs.free_port()
    confdir = tmp / "stream-confdir"
    confdir.mkdir(mode=0o700)
    proc = procs.spawn([str(MITMDUMP), "-q", "--listen-host", "127.0.0.1", "--listen-port", str(port),
                        "--set", f"confdir={confdir}", "--set", "connection_strategy=lazy",
                        "--set", "upstream_cert=false", "--set", "stream_large_bodies=1"],
                       log=tmp / "stream-mitmdump.log")
    try:
        procs.wait_for_port(port, proc=proc, timeout=30)
        yield port
    finally:
        procs.stop(proc)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SseHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    up_port = server.server_address[1]
    try:
        with tempfile.TemporaryDirectory(prefix="roster-bench-stream-") as tmpdir:
            tmp = Path(tmpdir)
            env = _control_plane_env(tmp)
            token = _prepare(env, up_port)
            subprocess.run([sys.executable, "-c", PRICE], cwd=procs.REPO, env={**os.environ, **env},
                           check=True)
            print(f"{RUNS} streamed answers of {EVENTS} events each, one at a time; all on loopback",
                  flush=True)
            direct = _direct(up_port)
            with _streaming_mitmdump(tmp) as plain_port:
                plain = _measure("plain mitmdump (stream_large_bodies)", plain_port, _request(up_port, None))
            with helper("instant-cp") as fake_port, gateway_process(
                    f"http://127.0.0.1:{fake_port}", SERVICE_TOKEN, tmp, allow_loopback_upstreams=True,
                    quiet=True) as gw:
                own = _measure("gateway + instant decision API", gw.port, _request(up_port, token))
            with helper("instant-cp", "secret") as fake_port, gateway_process(
                    f"http://127.0.0.1:{fake_port}", SERVICE_TOKEN, tmp, allow_loopback_upstreams=True,
                    quiet=True) as gw:
                scrubbed = _measure("gateway + instant API, secret scrubbed", gw.port,
                                    _request(up_port, token))
            with procs.decision_api_server(env, tmp) as cp_url, gateway_process(
                    cp_url, SERVICE_TOKEN, tmp, allow_loopback_upstreams=True, quiet=True) as gw:
                procs.wait_for_http(cp_url + "/api/gateway/health", timeout=30)
                gateway = _measure("roster gateway (metered)", gw.port, _request(up_port, token))
    finally:
        server.shutdown()
        server.server_close()
    print(f"TTFT added over streaming mitmdump: {gateway['ttft'] - plain['ttft']:+.2f} ms p50 "
          f"(target <= +3 ms); throughput {gateway['rate'] / plain['rate']:.2f}x (target >= 0.9x); "
          f"direct TTFT {direct['ttft']:.2f} ms")
    print(f"the gateway's own cost (instant decision API): TTFT added {own['ttft'] - plain['ttft']:+.2f} ms "
          f"p50, throughput {own['rate'] / plain['rate']:.2f}x; with an injected secret scrubbed from the "
          f"stream: {scrubbed['ttft'] - plain['ttft']:+.2f} ms, {scrubbed['rate'] / plain['rate']:.2f}x")


def _direct(up_port: int) -> dict:
    body = _request(up_port, None).replace(f"POST http://127.0.0.1:{up_port}".encode(), b"POST ", 1)
    return _measure("direct (no proxy)", up_port, body)
