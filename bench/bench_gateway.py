"""Gateway overhead: plain mitmdump vs the Roster gateway (full decision path through a real control
plane: the decision API process as `make up` runs it, policy, budget reservation, audit append, batched
outcomes) against the same local upstream, over plain HTTP and over intercepted HTTPS (TLS from the
client to the proxy inside a CONNECT tunnel, TLS from the proxy to an HTTPS upstream under a throwaway
CA that both proxies trust; keep-alive on both legs), with the control plane on SQLite and on a
throwaway PostgreSQL 15 (bench/databases.py).

Reports p50/p99 at concurrency 1 and requests/s at concurrency 16, then the same with the decision API
slowed by 20 ms (a delaying TCP proxy in front of it). Targets: added p50 <= 2 ms, c16 >= 0.8x plain
mitmdump, for each scheme and database. `python -m bench gateway` runs only this; ROSTER_BENCH_GW_C1 /
_C16 set the request counts, ROSTER_BENCH_QUICK=1 makes them small (a check that it runs)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench import databases
from bench.gateway_servers import helper
from bench.load_client import Target, http_target, https_target, measure
from tests.integration.gateway.upstreams import TestCA
from tests.support import procs
from tests.support.gateway import MITMDUMP, gateway_process

SERVICE_TOKEN = "gst_bench_" + base64.urlsafe_b64encode(os.urandom(18)).decode()
C1_REQUESTS = databases.count("ROSTER_BENCH_GW_C1", 400, 48)
C16_REQUESTS = databases.count("ROSTER_BENCH_GW_C16", 1600, 160)
WARMUP = 10 if databases.QUICK else 50
SLOW_DECIDE_MS = 20
TARGET_ADDED_P50_MS = 2.0
TARGET_C16_RATIO = 0.8
SCHEMES = ("HTTP", "HTTPS")

# --- the control plane: a fresh migrated database and the decision API process ---

SETUP = """
import django; django.setup()
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status, worker_create
from controlplane.policy.models import Grant
worker = worker_create("bench-gateway")
run, raw = run_create(worker)
run_set_status(run.pk, Run.Status.RUNNING)
Run.objects.filter(pk=run.pk).update(box_address="127.0.0.1")  # the bench's clients dial over loopback
Grant.objects.create(slug="bench-upstream", host="127.0.0.1", port={port}, schemes=["http"], untrusted=False)
if {tls_port}:
    Grant.objects.create(slug="bench-upstream-tls", host="127.0.0.1", port={tls_port}, schemes=["https"],
                         untrusted=False)
print(raw)
"""


def _control_plane_env(tmp: Path, database_url: str | None = None) -> dict[str, str]:
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    env = procs.control_plane_env(str(tmp / "bench.sqlite3"), redis_url, {
        "ROSTER_GATEWAY_TOKEN_SHA256": hashlib.sha256(SERVICE_TOKEN.encode()).hexdigest(),
        "ROSTER_VAULT_KEY_FILE": str(tmp / "vault.key"), "ROSTER_VAR_DIR": str(tmp),
        "ROSTER_LOG_LEVEL": "ERROR",
    })
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def _prepare(env: dict[str, str], upstream_port: int, tls_port: int = 0) -> str:
    full_env = {**os.environ, **env}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=procs.REPO,
                   env=full_env, check=True)
    out = subprocess.run([sys.executable, "-c", SETUP.format(port=upstream_port, tls_port=tls_port)],
                         cwd=procs.REPO, env=full_env, check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


@contextlib.contextmanager
def _plain_mitmdump(tmp: Path, upstream_ca: Path) -> Iterator[tuple[int, Path]]:
    """Plain mitmdump, intercepting TLS with the same options and upstream trust as the gateway; yields its
    port and its CA's public certificate."""
    port = procs.free_port()
    confdir = tmp / "plain-confdir"
    confdir.mkdir(mode=0o700)
    proc = procs.spawn([str(MITMDUMP), "-q", "--listen-host", "127.0.0.1", "--listen-port", str(port),
                        "--set", f"confdir={confdir}", "--set", "connection_strategy=lazy",
                        "--set", "upstream_cert=false",
                        "--set", f"ssl_verify_upstream_trusted_ca={upstream_ca}"], log=tmp / "plain.log")
    try:
        procs.wait_for_port(port, proc=proc, timeout=30)
        ca_cert = confdir / "mitmproxy-ca-cert.pem"
        deadline = time.monotonic() + 10
        while not ca_cert.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield port, ca_cert
    finally:
        procs.stop(proc)


class _Rows:
    """Measures each proxy over both schemes and keeps the results by (row, scheme)."""

    def __init__(self, up_port: int, tls_port: int):
        self.up_port, self.tls_port = up_port, tls_port
        self.results: dict[tuple[str, str], dict] = {}

    def targets(self, proxy_port: int, token: str | None, proxy_ca: Path) -> dict[str, Target]:
        return {"HTTP": http_target(proxy_port, self.up_port, token),
                "HTTPS": https_target(proxy_port, self.tls_port, token, proxy_ca)}

    def measure(self, row: str, proxy_port: int, token: str | None, proxy_ca: Path,
                schemes: tuple[str, ...] = SCHEMES) -> None:
        targets = self.targets(proxy_port, token, proxy_ca)
        for scheme in schemes:
            self.results[(row, scheme)] = measure(f"{row} [{scheme}]", targets[scheme], C1_REQUESTS,
                                                  C16_REQUESTS, WARMUP)

    def summary(self, row: str, scheme: str, what: str, targets: bool = True) -> str:
        plain, mine = self.results[("plain mitmdump", scheme)], self.results[(row, scheme)]
        p50_target = f" (target <= +{TARGET_ADDED_P50_MS:g} ms)" if targets else ""
        ratio_target = f" (target >= {TARGET_C16_RATIO}x)" if targets else ""
        return (f"{what}: added p50 {mine['p50'] - plain['p50']:+.2f} ms{p50_target}; "
                f"c16 {mine['rps16'] / plain['rps16']:.2f}x plain{ratio_target}")


def _gateway(cp_url: str, tmp: Path, upstream_ca: Path):
    return gateway_process(cp_url, SERVICE_TOKEN, tmp, allow_loopback_upstreams=True, quiet=True,
                           extra_options={"ssl_verify_upstream_trusted_ca": upstream_ca})


def _full_path_rows(rows: _Rows, kind: str, tmp: Path, upstream_ca: Path, with_slow: bool) -> str:
    """The gateway with the real decision API on one database; returns the rows' label."""
    label = f"roster gateway, {databases.LABELS[kind]}"
    with databases.database(kind, tmp / kind) as db:
        env = _control_plane_env(tmp / kind, db.url)
        token = _prepare(env, rows.up_port, rows.tls_port)
        with procs.decision_api_server(env, tmp / kind) as cp_url:
            procs.wait_for_http(cp_url + "/api/gateway/health", timeout=30)
            with _gateway(cp_url, tmp, upstream_ca) as gw:
                rows.measure(label, gw.port, token, gw.ca_cert_path)
            if with_slow:
                cp_port = int(cp_url.rsplit(":", 1)[1])
                with helper("delay", str(cp_port), str(SLOW_DECIDE_MS)) as slow_port, _gateway(
                        f"http://127.0.0.1:{slow_port}", tmp, upstream_ca) as gw:
                    rows.measure(f"{label}, decide +{SLOW_DECIDE_MS} ms", gw.port, token, gw.ca_cert_path,
                                 schemes=("HTTP",))
    return label


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="roster-bench-gw-") as tmpdir:
        tmp = Path(tmpdir)
        ca = TestCA(tmp)
        cert, key = ca.leaf()
        with helper("upstream") as up_port, helper("upstream", str(cert), str(key)) as tls_port:
            rows = _Rows(up_port, tls_port)
            print(f"c1: {C1_REQUESTS} sequential requests; c16: {C16_REQUESTS} requests over 16 keep-alive "
                  "connections (HTTPS: one CONNECT tunnel each, TLS to the proxy and from it to the "
                  "upstream); upstream and control plane on loopback", flush=True)
            with _plain_mitmdump(tmp, ca.cert_path) as (plain_port, plain_ca):
                rows.measure("plain mitmdump", plain_port, None, plain_ca)
            with helper("instant-cp") as fake_port, _gateway(f"http://127.0.0.1:{fake_port}", tmp,
                                                             ca.cert_path) as gw:
                rows.measure("gateway + instant decision API", gw.port, "bench-any-token", gw.ca_cert_path)
            labels = []
            for kind in databases.available_databases("gateway bench, full decision path"):
                (tmp / kind).mkdir()
                labels.append(_full_path_rows(rows, kind, tmp, ca.cert_path, with_slow=not labels))
    for scheme in SCHEMES:
        for label in labels:
            print(rows.summary(label, scheme, f"{scheme}, {label.removeprefix('roster gateway, ')}"))
        print(rows.summary("gateway + instant decision API", scheme,
                           f"{scheme}, the gateway's own cost (instant decision API)"))
    if labels:
        slow = f"{labels[0]}, decide +{SLOW_DECIDE_MS} ms"
        print(rows.summary(slow, "HTTP", f"HTTP, decide slowed by {SLOW_DECIDE_MS} ms", targets=False)
              + " (other flows keep moving while one waits)")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    if any(result["errors"] for result in rows.results.values()):
        raise RuntimeError("some benchmark requests failed; numbers above are not trustworthy")


if __name__ == "__main__":
    main()
