"""Gateway overhead: plain mitmdump vs the Roster gateway (full decision path through a real control
plane: the decision API process as `make up` runs it, policy, budget reservation, audit append, batched
outcomes) against the same local upstream.

Reports p50/p99 at concurrency 1 and requests/s at concurrency 16, then the same with the decision API
slowed by 20 ms (a delaying TCP proxy in front of it). Targets: added p50 <= 2 ms, c16 >= 0.8x.
`python -m bench gateway` runs only this; ROSTER_BENCH_GW_C1 / _C16 set the request counts.
Helpers run as subprocesses: `python -m bench.bench_gateway
upstream` and `python -m bench.bench_gateway delay PORT MS` (each prints its listening port)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support import procs
from tests.support.gateway import MITMDUMP, gateway_process

SERVICE_TOKEN = "gst_bench_" + base64.urlsafe_b64encode(os.urandom(18)).decode()
WARMUP = 50
C1_REQUESTS = int(os.environ.get("ROSTER_BENCH_GW_C1", 400))
C16_REQUESTS = int(os.environ.get("ROSTER_BENCH_GW_C16", 1600))
SLOW_DECIDE_MS = 20
GW_OPTIONS: dict[str, object] = {}

# --- helper servers (subprocesses) ---

OK_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


async def _read_request(reader) -> bytes:
    """One keep-alive request: returns its head, with its body (if any) read and dropped."""
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":", 1)[1]))
    return head


async def _upstream_main() -> None:
    async def handle(reader, writer):
        try:
            while True:
                await _read_request(reader)
                writer.write(OK_RESPONSE)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


_ALLOW = (b'{"verdict":"allow","reason":null,"status":200,"message":"","decision_id":"dc_bench",'
          b'"grant":"bench","tunnel":false,"trace":false,"inject":[],"replace":[],"approval_id":null,'
          b'"hold_seconds":0,"budget":null}')


# An allow that injects a (made-up) secret: the gateway then scrubs the response for echoes of it.
BENCH_SECRET = "sk-bench-" + "Zq8vP3kL0xW9mN4tRr77" * 2
_ALLOW_SECRET = _ALLOW.replace(b'"inject":[],"replace":[]', (
    b'"inject":[{"header":"x-bench-key","value":"Bearer ' + BENCH_SECRET.encode() + b'"}],'
    b'"replace":[{"sentinel":"sk-roster-bench-sentinel-0000000000","value":"' + BENCH_SECRET.encode()
    + b'"}]'))


async def _instant_cp_main(secret: bool = False) -> None:
    """A decision API that answers allow at once: isolates the gateway's own cost (`secret`: the allow
    injects a secret, so the gateway also scrubs every response for its echoes)."""
    allow = _ALLOW_SECRET if secret else _ALLOW

    async def handle(reader, writer):
        try:
            while True:
                head = await _read_request(reader)
                line = head.split(b"\r\n", 1)[0]
                body = (allow if b"/decide" in line
                        else b'{"sentinels":[]}' if b"/sentinels" in line else b'{"ok":true}')
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


async def _delay_main(target_port: int, delay_ms: int) -> None:
    """A TCP proxy that holds every client->server chunk (one HTTP request each) for delay_ms."""

    async def pipe(reader, writer, delay):
        try:
            while data := await reader.read(65536):
                if delay:
                    await asyncio.sleep(delay)
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def handle(reader, writer):
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
        await asyncio.gather(pipe(reader, up_writer, delay_ms / 1000), pipe(up_reader, writer, 0))

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


@contextlib.contextmanager
def _helper(*args: str):
    proc = subprocess.Popen([sys.executable, "-m", "bench.bench_gateway", *args], cwd=procs.REPO,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        port = int(proc.stdout.readline())
        yield port
    finally:
        procs.stop(proc)


# --- the load client: raw keep-alive sockets, so the client costs as little as possible ---

async def _read_response(reader) -> tuple[int, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length, close = 0, False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"connection" and value.strip().lower() == b"close":
            close = True
    if length:
        await reader.readexactly(length)
    return status, close


async def _worker(proxy_port: int, request: bytes, count: int, latencies: list, errors: list) -> None:
    reader = writer = None
    for _ in range(count):
        if writer is None:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy_port)
        start = time.perf_counter()
        writer.write(request)
        status, close = await _read_response(reader)
        latencies.append(time.perf_counter() - start)
        if status != 200:
            errors.append(status)
        if close:
            writer.close()
            reader = writer = None
    if writer is not None:
        writer.close()


async def _load(proxy_port: int, request: bytes, total: int, concurrency: int) -> tuple[list, list, float]:
    latencies: list[float] = []
    errors: list[int] = []
    per = total // concurrency
    start = time.perf_counter()
    await asyncio.gather(*(_worker(proxy_port, request, per, latencies, errors) for _ in range(concurrency)))
    return latencies, errors, time.perf_counter() - start


def _measure(name: str, proxy_port: int, request: bytes) -> dict:
    asyncio.run(_load(proxy_port, request, WARMUP, 1))
    lat, err1, _ = asyncio.run(_load(proxy_port, request, C1_REQUESTS, 1))
    _, err16, elapsed = asyncio.run(_load(proxy_port, request, C16_REQUESTS, 16))
    lat_ms = sorted(x * 1000 for x in lat)
    result = {
        "name": name, "p50": statistics.median(lat_ms),
        "p99": lat_ms[min(len(lat_ms) - 1, int(len(lat_ms) * 0.99))],
        "rps16": (C16_REQUESTS // 16 * 16) / elapsed, "errors": len(err1) + len(err16),
        "error_statuses": sorted(set(err1 + err16)),
    }
    print(f"  {name:<34} p50 {result['p50']:7.2f} ms   p99 {result['p99']:7.2f} ms   "
          f"c16 {result['rps16']:7.0f} req/s   errors {result['errors']} {result['error_statuses'] or ''}",
          flush=True)
    return result


# --- the control plane: a fresh migrated SQLite database and the decision API process ---

SETUP = """
import django; django.setup()
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status, worker_create
from controlplane.policy.models import Grant
worker = worker_create("bench-gateway")
run, raw = run_create(worker)
run_set_status(run.pk, Run.Status.RUNNING)
Grant.objects.create(slug="bench-upstream", host="127.0.0.1", port={port}, schemes=["http"], untrusted=False)
print(raw)
"""


def _control_plane_env(tmp: Path) -> dict[str, str]:
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    return procs.control_plane_env(str(tmp / "bench.sqlite3"), redis_url, {
        "ROSTER_GATEWAY_TOKEN_SHA256": hashlib.sha256(SERVICE_TOKEN.encode()).hexdigest(),
        "ROSTER_VAULT_KEY_FILE": str(tmp / "vault.key"), "ROSTER_VAR_DIR": str(tmp),
        "ROSTER_LOG_LEVEL": "ERROR",
    })


def _prepare(env: dict[str, str], upstream_port: int) -> str:
    full_env = {**os.environ, **env}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=procs.REPO,
                   env=full_env, check=True)
    out = subprocess.run([sys.executable, "-c", SETUP.format(port=upstream_port)], cwd=procs.REPO,
                         env=full_env, check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


@contextlib.contextmanager
def _plain_mitmdump(tmp: Path):
    port = procs.free_port()
    confdir = tmp / "plain-confdir"
    confdir.mkdir(mode=0o700)
    proc = procs.spawn([str(MITMDUMP), "-q", "--listen-host", "127.0.0.1", "--listen-port", str(port),
                        "--set", f"confdir={confdir}", "--set", "connection_strategy=lazy",
                        "--set", "upstream_cert=false"], log=tmp / "plain.log")
    try:
        procs.wait_for_port(port, proc=proc, timeout=30)
        yield port
    finally:
        procs.stop(proc)


def _request(upstream_port: int, token: str | None) -> bytes:
    auth = ""
    if token:
        auth = "Proxy-Authorization: Basic " + base64.b64encode(f"run:{token}".encode()).decode() + "\r\n"
    return (f"GET http://127.0.0.1:{upstream_port}/bench HTTP/1.1\r\nHost: 127.0.0.1:{upstream_port}\r\n"
            f"{auth}User-Agent: roster-bench\r\n\r\n").encode()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="roster-bench-gw-") as tmpdir, _helper("upstream") as up_port:
        tmp = Path(tmpdir)
        env = _control_plane_env(tmp)
        token = _prepare(env, up_port)
        print(f"c1: {C1_REQUESTS} sequential requests; c16: {C16_REQUESTS} requests over 16 keep-alive "
              f"connections; upstream and control plane on loopback", flush=True)
        with procs.decision_api_server(env, tmp) as cp_url:
            procs.wait_for_http(cp_url + "/api/gateway/health", timeout=30)
            cp_port = int(cp_url.rsplit(":", 1)[1])
            with _plain_mitmdump(tmp) as plain_port:
                plain = _measure("plain mitmdump", plain_port, _request(up_port, None))
            with _helper("instant-cp") as fake_port, gateway_process(
                    f"http://127.0.0.1:{fake_port}", SERVICE_TOKEN, tmp, allow_loopback_upstreams=True,
                    quiet=True, extra_options=GW_OPTIONS) as gw:
                own = _measure("gateway + instant decision API", gw.port, _request(up_port, token))
            with gateway_process(cp_url, SERVICE_TOKEN, tmp, allow_loopback_upstreams=True, quiet=True,
                                 extra_options=GW_OPTIONS) as gw:
                gateway = _measure("roster gateway (full decision path)", gw.port, _request(up_port, token))
            with _helper("delay", str(cp_port), str(SLOW_DECIDE_MS)) as slow_port, gateway_process(
                    f"http://127.0.0.1:{slow_port}", SERVICE_TOKEN, tmp, allow_loopback_upstreams=True,
                    quiet=True, extra_options=GW_OPTIONS) as gw:
                slow = _measure(f"roster gateway, decide +{SLOW_DECIDE_MS} ms", gw.port,
                                _request(up_port, token))
    print(f"added p50: {gateway['p50'] - plain['p50']:+.2f} ms (target <= +2 ms); "
          f"c16 throughput: {gateway['rps16'] / plain['rps16']:.2f}x plain (target >= 0.8x)")
    print(f"the gateway's own cost (instant decision API): added p50 {own['p50'] - plain['p50']:+.2f} ms, "
          f"c16 {own['rps16'] / plain['rps16']:.2f}x plain")
    print(f"decide slowed by {SLOW_DECIDE_MS} ms: added p50 {slow['p50'] - plain['p50']:+.2f} ms, c16 "
          f"{slow['rps16'] / plain['rps16']:.2f}x plain (other flows keep moving while one waits)")
    if gateway["errors"] or slow["errors"] or plain["errors"]:
        raise RuntimeError("some benchmark requests failed; numbers above are not trustworthy")


if __name__ == "__main__":
    if sys.argv[1:2] == ["upstream"]:
        asyncio.run(_upstream_main())
    elif sys.argv[1:2] == ["instant-cp"]:
        asyncio.run(_instant_cp_main(secret=sys.argv[2:3] == ["secret"]))
    elif sys.argv[1:2] == ["delay"]:
        asyncio.run(_delay_main(int(sys.argv[2]), int(sys.argv[3])))
    else:
        main()
