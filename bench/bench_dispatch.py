"""Dispatch latency: from `run_start` (a run requested) to the run's process running inside its box,
through the whole real path (Redis, a Celery worker's admission pass, the box watcher that starts the box,
the claim, preflight with the real gateway's health
check and the host firewall check, the box's mounts and limits), side by side with a bare `docker run`
of the same image running the same command. The process prints the time it started; both sides are
measured to that timestamp.

Runs in a child process against a throwaway SQLite database, its own Redis, a throwaway locked network
and its own gateway + control plane. ROSTER_BENCH_DISPATCH_RUNS sets the number of measured runs.

Concurrent starts: ROSTER_BENCH_DISPATCH_CONCURRENT runs (default 10) requested at once, each measured from
the request to its process running, with the Celery worker's two processes: a box holds none of them."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = int(os.environ.get("ROSTER_BENCH_DISPATCH_RUNS", "10"))
WARMUP = 2
CONCURRENT = int(os.environ.get("ROSTER_BENCH_DISPATCH_CONCURRENT", "10"))
IMAGE = os.environ.get("ROSTER_BOX_IMAGE", "roster-box:latest")
PRINT_START = ["python3", "-c", "import time; print(repr(time.time()))"]


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median": statistics.median(ordered), "p90": ordered[max(0, int(len(ordered) * 0.9) - 1)],
            "min": ordered[0], "max": ordered[-1]}


def _bare_docker_run(network: str) -> float:
    begun = time.time()
    out = subprocess.run(
        ["docker", "run", "--rm", "--network", network, "--dns", "127.0.0.1", "-e", "HTTP_PROXY=http://x",
         "-e", "HTTPS_PROXY=http://x", IMAGE, *PRINT_START],
        check=True, capture_output=True, text=True,
    ).stdout
    return float(out.strip().splitlines()[-1]) - begun


def _roster_run(worker) -> float:
    from controlplane.dispatch.starting import run_start
    from controlplane.fleet.models import Run

    begun = time.time()
    run = run_start(worker, PRINT_START, timeout=60)
    deadline = time.monotonic() + 60
    while True:
        run.refresh_from_db()
        if not run.is_live:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run.pk} still {run.status}")
        time.sleep(0.02)
    if run.status != Run.Status.SUCCEEDED:
        raise RuntimeError(f"run {run.pk} {run.status}: {run.status_reason}")
    return float(run.output.strip().splitlines()[-1]) - begun


def _concurrent_starts(worker, count: int) -> list[float]:
    """`count` runs requested at once; each one's seconds from the burst's start to its process running."""
    from controlplane.dispatch.starting import run_start
    from controlplane.fleet.models import Run

    begun = time.time()
    runs = [run_start(worker, PRINT_START, timeout=120) for _ in range(count)]
    deadline = time.monotonic() + 120
    while Run.objects.filter(pk__in=[r.pk for r in runs], status__in=Run.LIVE_STATUSES).exists():
        if time.monotonic() > deadline:
            raise RuntimeError("concurrent runs still live after 120s")
        time.sleep(0.05)
    samples = []
    for run in Run.objects.filter(pk__in=[r.pk for r in runs]):
        if run.status != Run.Status.SUCCEEDED:
            raise RuntimeError(f"run {run.pk} {run.status}: {run.status_reason}")
        samples.append(float(run.output.strip().splitlines()[-1]) - begun)
    return samples


def _child(tmp: Path, database_url: str) -> dict:
    from tests.support import procs
    from tests.support.gateway import gateway_process

    namespace = "rsb" + secrets.token_hex(3)
    network, bridge, port = f"{namespace}-net", f"{namespace}br", procs.free_port()
    service_token = "gst_bench_" + secrets.token_urlsafe(24)
    subprocess.run([str(REPO / "workers" / "build.sh")], check=True, capture_output=True)
    subprocess.run([str(REPO / "scripts" / "network-lockdown.sh"), network, bridge, str(port)], check=True,
                   capture_output=True)
    try:
        with procs.redis_server(tmp) as redis_url:
            box = {"ROSTER_BOX_NAMESPACE": namespace, "ROSTER_BOX_NETWORK": network,
                   "ROSTER_GATEWAY_PORT": str(port), "ROSTER_BOX_IMAGE": IMAGE,
                   "ROSTER_BOX_RUNS_DIR": str(tmp / "runs"), "ROSTER_BOX_CODE_DIR": str(tmp / "code"),
                   "ROSTER_VAULT_KEY_FILE": str(tmp / "vault.key"),
                   "ROSTER_BOXES_PER_HOST": str(max(CONCURRENT, 2)),
                   "ROSTER_GATEWAY_TOKEN_SHA256": hashlib.sha256(service_token.encode()).hexdigest()}
            env = procs.control_plane_env(database_url.removeprefix("sqlite:///"), redis_url, box)
            with procs.daphne_server(env, tmp) as url, gateway_process(
                url, service_token, tmp, quiet=True,
                extra_options={"listen_host": "0.0.0.0", "listen_port": port},
            ) as gw:
                env.update({"ROSTER_GATEWAY_CA_CERT": str(gw.ca_cert_path),
                            "ROSTER_GATEWAY_HEALTH_URL": gw.health_url})
                os.environ.update(env)
                with procs.celery_worker(env, tmp), procs.box_watcher(env, tmp):
                    import django

                    django.setup()
                    from controlplane.celery import app
                    from controlplane.fleet.services import worker_create

                    app.conf.broker_url = redis_url
                    worker = worker_create("bench-worker")
                    for _ in range(WARMUP):
                        _roster_run(worker), _bare_docker_run(network)
                    roster, bare = [], []
                    for _ in range(RUNS):  # interleaved, so load on the shared machine hits both alike
                        roster.append(_roster_run(worker))
                        bare.append(_bare_docker_run(network))
                    concurrent = _concurrent_starts(worker, CONCURRENT)
    finally:
        subprocess.run(["docker", "network", "rm", network], capture_output=True)
        subprocess.run([str(REPO / "scripts" / "network-unlock.sh"), bridge], capture_output=True)
    return {"roster": _stats(roster), "bare": _stats(bare), "concurrent": _stats(concurrent)}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="roster-bench-dispatch-") as tmp:
        database_url = f"sqlite:///{tmp}/bench.sqlite3"
        env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "controlplane.settings",
               "PYTHONPATH": str(REPO), "ROSTER_VAR_DIR": tmp}
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env,
                       check=True)
        out = subprocess.run([sys.executable, "-m", "bench.bench_dispatch", "--child", tmp, database_url],
                             cwd=REPO, env=env, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    roster, bare, concurrent = result["roster"], result["bare"], result["concurrent"]
    print(f"dispatch latency, request -> process running in the box ({RUNS} runs each, seconds)")
    print(f"{'':28}{'median':>9}{'p90':>9}{'min':>9}{'max':>9}")
    rows = (("roster run_start (Celery)", roster), ("bare docker run", bare),
            (f"{CONCURRENT} concurrent starts", concurrent))
    for label, row in rows:
        print(f"{label:28}" + "".join(f"{row[k]:9.3f}" for k in ("median", "p90", "min", "max")))
    ratio = roster["median"] / bare["median"]
    print(f"ratio (median): {ratio:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(_child(Path(sys.argv[2]), sys.argv[3])))
    else:
        main()
