"""Decision-API latency: real servers on a fresh database (SQLite in a temp directory, then a throwaway
PostgreSQL 15 cluster: bench/databases.py), 50 workers and 500 grants loaded, POST /api/gateway/decide
over keep-alive connections: the decision API's own process (what the gateway calls, as `make up` runs it),
as one process and as several sharing the port and the chain (--processes), and, for comparison, the web
server (daphne). Prints
p50/p99 and requests per second at concurrency 1 and 16, one table per database.
`python -m bench decision`; ROSTER_BENCH_QUICK=1 for a quick check that it runs."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from bench import databases

REPO = Path(__file__).resolve().parents[1]
WORKERS = 50
GRANTS = 500
GLOBAL_GRANTS = 50  # apply to every worker; the other 450 are 9 per worker
REQUESTS_C1 = databases.count("ROSTER_BENCH_DECISION_REQUESTS", 1000, 64)
REQUESTS_C16 = REQUESTS_C1 * 2
WARMUP = 10 if databases.QUICK else 100
# Issue 28's targets: c16 decisions/s per database (or half the no-work floor, whichever is lower), and
# the in-process decision's p50 in ms.
TARGET_C16_DECISIONS = {"sqlite": 1500, "postgres": 1000}
TARGET_IN_PROCESS_MS = {"sqlite": 1.0, "postgres": 2.0}
SERVER_START_TIMEOUT = 60
FLOOR_SERVER = "floor: no work (uvicorn)"
# The decision API as one process and as several sharing its port and the chain (--processes; by default
# ROSTER_DECISION_PROCESSES is one per core): at least 2, so the two rows always compare.
PROCESSES = max(2, databases.count("ROSTER_BENCH_DECISION_PROCESSES", os.cpu_count() or 1, 2))
ONE_PROCESS, MANY_PROCESSES = "decision API (1 process)", f"decision API ({PROCESSES} processes)"
_DECISION_API = ("controlplane.decision_server", "--host", "127.0.0.1", "--port", "{port}", "--processes")
# name, `python -m` arguments ({port} filled in)
SERVERS = (
    (ONE_PROCESS, (*_DECISION_API, "1")),
    (MANY_PROCESSES, (*_DECISION_API, str(PROCESSES))),
    ("web server (daphne)", ("daphne", "-b", "127.0.0.1", "-p", "{port}", "controlplane.asgi:application")),
    (FLOOR_SERVER, ("uvicorn", "bench.decision_floor:app", "--host", "127.0.0.1", "--port", "{port}",
                    "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning")),
)


def _seed() -> None:
    """Runs in a child process with the bench's environment: loads workers, grants, one secret and one
    live run per worker; prints the run tokens as JSON."""
    import django

    django.setup()
    from controlplane.fleet.models import Run
    from controlplane.fleet.services import run_create, run_set_status, worker_create
    from controlplane.policy.models import Grant
    from controlplane.vault.services import secret_set

    secret = secret_set("bench-openai", "bench-real-value-" + secrets.token_hex(8), kind="openai")
    tokens = []
    per_worker = (GRANTS - GLOBAL_GRANTS) // WORKERS
    grants = []
    for w in range(WORKERS):
        worker = worker_create(f"worker-{w:02d}")
        for g in range(per_worker):
            grants.append(Grant(slug=f"w{w:02d}-g{g}", worker=worker, host=f"api{g}.example.com",
                                schemes=["https"], methods=["GET", "POST"], paths=["/v1/*"]))
        run, raw = run_create(worker)
        run_set_status(run.pk, Run.Status.RUNNING)
        Run.objects.filter(pk=run.pk).update(box_address=BOX_ADDRESS)  # the box the token is bound to
        tokens.append(raw)
    for g in range(GLOBAL_GRANTS - 1):
        grants.append(Grant(slug=f"all-{g}", host=f"*.shared{g}.example.org", schemes=["https"]))
    grants.append(Grant(slug="all-model", host="api.openai.com", schemes=["https"], paths=["/v1/chat/*"],
                        secret=secret, inject_header="authorization", inject_format="Bearer {secret}",
                        cost_per_call=10))
    Grant.objects.bulk_create(grants)
    assert Grant.objects.count() == GRANTS, Grant.objects.count()
    print(json.dumps({"tokens": tokens, "sentinel": secret.sentinel}))


def _service_only(tokens: list[str], sentinel: str, total: int) -> None:
    """Runs in a child process: the decision service called in-process (no HTTP), to separate the
    decision's own cost from the server's, two ways: as the decision API runs a request that arrives
    alone (a group of one on its database thread: controlplane.egress.db_thread), and alone outside any
    group (the path a group's rolled-back jobs take). Prints both latency lists in ms as JSON."""
    from controlplane.egress.server import set_process_defaults

    set_process_defaults()  # the decision API's own settings (prepared statements on PostgreSQL)
    import django

    django.setup()
    from controlplane.egress import decide, request
    from controlplane.egress.db_thread import as_group, prepared_args

    requests = []
    for token in tokens:
        body = _body(token, sentinel)
        body["headers"] = tuple(tuple(h) for h in body["headers"])
        body["mcp"] = ()
        requests.append(request.EgressRequest(**body))

    def as_served(req):
        args = prepared_args(decide.decide, req)  # judged before the lock, as the database thread does
        with as_group():
            return decide.decide(*args)

    measured = []
    for call in (as_served, decide.decide):
        latencies = []
        for i in range(WARMUP + total):
            start = time.perf_counter()
            answer = call(requests[i % len(requests)])
            if i >= WARMUP:
                latencies.append((time.perf_counter() - start) * 1000)
            if answer.decision.verdict != "allow":
                raise RuntimeError(f"not allowed: {answer.decision.reason}")
        measured.append(latencies)
    print(json.dumps(measured))


def _env(tmp: Path, service_token: str, database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "ROSTER_VAR_DIR": str(tmp),
        "DATABASE_URL": database_url,
        "ROSTER_VAULT_KEY_FILE": str(tmp / "vault.key"),
        "ROSTER_GATEWAY_TOKEN_SHA256": hashlib.sha256(service_token.encode()).hexdigest(),
        "ROSTER_LOG_LEVEL": "ERROR",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


BOX_ADDRESS = "10.89.0.2"  # every bench run's box address: where its token is accepted from


def _body(token: str, sentinel: str) -> dict:
    return {"token": token, "client": BOX_ADDRESS, "method": "POST", "scheme": "https",
            "host": "api.openai.com", "port": 443,
            "path": "/v1/chat/completions", "body_size": 2, "body_sha256": "0" * 64, "body_preview": "{}",
            "headers": [["content-type", "application/json"], ["authorization", f"Bearer {sentinel}"]],
            "mcp": []}


def _measure(url: str, auth: dict, bodies: list[dict], total: int,
             concurrency: int) -> tuple[list[float], float]:
    latencies: list[float] = []
    lock = threading.Lock()
    counter = iter(range(total))
    errors: list[str] = []

    parts = urlsplit(url)
    encoded = [json.dumps(body).encode() for body in bodies]
    headers = {**auth, "Content-Type": "application/json"}

    def worker() -> None:
        # http.client, not httpx: a lighter client leaves more of the shared CPUs to the server measured.
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        try:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                start = time.perf_counter()
                conn.request("POST", parts.path, body=encoded[i % len(encoded)], headers=headers)
                response = conn.getresponse()
                payload = response.read()
                elapsed = time.perf_counter() - start
                if response.status != 200 or json.loads(payload)["verdict"] != "allow":
                    errors.append(f"{response.status} {payload[:200]!r}")
                with lock:
                    latencies.append(elapsed)
        finally:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} requests were not allowed, e.g. {errors[0]}")
    return latencies, wall


def _c16_target(kind: str, floor_per_second: float) -> float:
    """The c16 target here: the database's figure, or half the no-work floor when that is lower."""
    return min(TARGET_C16_DECISIONS[kind], floor_per_second / 2)


def _budget_ms(target: float, floor_per_second: float) -> float:
    """What is left per decision for the target once the floor's own per-request cost is paid."""
    return max(1000 / target - 1000 / floor_per_second, 0.0)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _child(env: dict[str, str], *args: str):
    """This module run in a child process with the bench's environment; its last line of output, as JSON."""
    out = subprocess.run([sys.executable, "-m", "bench.bench_decision", *args], cwd=REPO, env=env,
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _bench_one(kind: str, service_token: str) -> None:
    from tests.support.procs import free_port, spawn, stop, wait_for_http

    with tempfile.TemporaryDirectory(prefix="roster-bench-decision-") as tmpdir, \
            databases.database(kind, Path(tmpdir)) as db:
        tmp = Path(tmpdir)
        env = _env(tmp, service_token, db.url)
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=REPO, env=env,
                       check=True)
        data = _child(env, "--seed")
        auth = {"Authorization": f"Bearer {service_token}"}
        bodies = [_body(token, data["sentinel"]) for token in data["tokens"]]
        rows = []
        for name, module_args in SERVERS:
            port = free_port()
            args = [sys.executable, "-m", *(a.format(port=port) for a in module_args)]
            server = spawn(args, env=env, log=tmp / f"{module_args[0]}.log")
            try:
                wait_for_http(f"http://127.0.0.1:{port}/api/gateway/health", timeout=SERVER_START_TIMEOUT,
                              proc=server)
                url = f"http://127.0.0.1:{port}/api/gateway/decide"
                _measure(url, auth, bodies, WARMUP, 1)
                for concurrency, total in ((1, REQUESTS_C1), (16, REQUESTS_C16)):
                    latencies, wall = _measure(url, auth, bodies, total, concurrency)
                    rows.append((name, concurrency, total, _percentile(latencies, 0.5) * 1000,
                                 _percentile(latencies, 0.99) * 1000, statistics.mean(latencies) * 1000,
                                 total / wall))
            finally:
                stop(server)
        data_file = tmp / "seed.json"
        data_file.write_text(json.dumps(data))
        served_ms, alone_ms = _child(env, "--service", str(data_file))
        commit_ms = _child(env, "--commit-floor")
    print(f"decision API ({db.label}, {WORKERS} workers, {GRANTS} grants; allow with secret inject, budget "
          "reserve and audit)")
    print(f"{'server':<28} {'concurrency':>11} {'requests':>8} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} "
          f"{'req/s':>8}")
    for name, concurrency, total, p50, p99, mean, rps in rows:
        print(f"{name:<28} {concurrency:>11} {total:>8} {p50:>8.2f} {p99:>8.2f} {mean:>8.2f} {rps:>8.0f}")
    in_process = (
        ("in-process", served_ms, "decide as the decision API runs one arriving alone: a group of one"),
        ("in-process, outside a group", alone_ms, "decide alone: the path of a rolled-back group's jobs"))
    for name, latencies, what in in_process:
        print(f"{name:<28} {'':>11} {len(latencies):>8} {_percentile(latencies, 0.5):>8.2f} "
              f"{_percentile(latencies, 0.99):>8.2f} {statistics.mean(latencies):>8.2f} {'':>8}"
              f"  ({what}, no HTTP)")
    print(f"{'floor: one durable commit':<28} {'':>11} {len(commit_ms):>8} "
          f"{_percentile(commit_ms, 0.5):>8.2f} "
          f"{_percentile(commit_ms, 0.99):>8.2f} {statistics.mean(commit_ms):>8.2f} {'':>8}"
          "  (a one-row transaction, BEGIN to COMMIT, nothing else)")
    c16 = {name: rps for name, concurrency, *_, rps in rows if concurrency == 16}
    floor = c16[FLOOR_SERVER]
    target = _c16_target(kind, floor)
    served_p50 = _percentile(served_ms, 0.5)
    print(f"{db.label}: decision API c16 {c16[ONE_PROCESS]:.0f} decisions/s with 1 process, "
          f"{c16[MANY_PROCESSES]:.0f} with {PROCESSES} (target >= {target:.0f} durable decisions/s: "
          f"{TARGET_C16_DECISIONS[kind]}, or half the no-work floor if lower); the same server and client "
          f"with no decision behind it: {floor:.0f}/s, so a decision may cost {_budget_ms(target, floor):.2f}"
          f" ms of server CPU at most for the target here; in-process p50 {served_p50:.2f} ms"
          f" (target <= {TARGET_IN_PROCESS_MS[kind]:.1f})")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)


def main() -> None:
    service_token = "gst_bench_" + secrets.token_urlsafe(24)
    for kind in databases.available_databases("decision API bench"):
        _bench_one(kind, service_token)


if __name__ == "__main__":
    if "--seed" in sys.argv:
        _seed()
    elif "--commit-floor" in sys.argv:
        import django

        django.setup()
        from bench.decision_floor import durable_commits

        print(json.dumps(durable_commits(REQUESTS_C1, WARMUP)))
    elif "--service" in sys.argv:
        seeded = json.loads(Path(sys.argv[-1]).read_text())
        _service_only(seeded["tokens"], seeded["sentinel"], REQUESTS_C1)
    else:
        main()
