"""Starting and stopping the real processes integration tests need (Redis, daphne, Celery, …).
Every process listens on loopback only, on a port picked free at start, and is killed at teardown."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
VENV_PY = sys.executable
# The decision API's processes in tests (tests/integration): more than one, so a state kept in one process
# that another would need shows up as a failure here.
DECISION_PROCESSES = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, host: str = "127.0.0.1", timeout: float = 20.0, proc=None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


def wait_for_http(url: str, timeout: float = 20.0, proc=None) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        try:
            httpx.get(url, timeout=0.5)
            return
        except httpx.HTTPError as exc:
            last = exc
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer after {timeout}s: {last}")


def stop(proc: subprocess.Popen, grace: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(grace)


def spawn(args: list[str], env: dict[str, str] | None = None, log: Path | None = None) -> subprocess.Popen:
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        args, cwd=REPO, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT,
        start_new_session=True,
    )


@contextlib.contextmanager
def redis_server(tmp: Path) -> Iterator[str]:
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("redis-server is not installed; run `make deps` (scripts/bootstrap.sh)")
    port = free_port()
    proc = spawn([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                  "--dir", str(tmp)], log=tmp / "redis.log")
    try:
        wait_for_port(port, proc=proc)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop(proc)


def control_plane_env(db_name: str, redis_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment that points a child process at the test database and the test Redis."""
    env = {
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "DATABASE_URL": f"sqlite:///{db_name}" if not db_name.startswith("postgres") else db_name,
        "REDIS_URL": redis_url,
        "PYTHONPATH": str(REPO),
    }
    env.update(extra or {})
    return env


@contextlib.contextmanager
def daphne_server(env: dict[str, str], tmp: Path) -> Iterator[str]:
    port = free_port()
    args = [VENV_PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "controlplane.asgi:application"]
    proc = spawn(args, env=env, log=tmp / "daphne.log")
    try:
        wait_for_port(port, proc=proc, timeout=30)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


@contextlib.contextmanager
def decision_api_server(env: dict[str, str], tmp: Path, metrics_port: int = 0,
                        processes: int = DECISION_PROCESSES) -> Iterator[str]:
    """The decision API (controlplane.decision_server), as scripts/up.sh runs it: `processes` worker
    processes sharing its port (ROSTER_DECISION_PROCESSES; 2 unless told, so every test through it runs
    with decisions in more than one process); with a metrics port, its metrics listener too (loopback)."""
    port = free_port()
    args = [VENV_PY, "-m", "controlplane.decision_server", "--host", "127.0.0.1", "--port", str(port),
            "--metrics-host", "127.0.0.1", "--metrics-port", str(metrics_port)]
    proc = spawn(args, env={"ROSTER_DECISION_PROCESSES": str(processes), **env}, log=tmp / "decision-api.log")
    try:
        wait_for_port(port, proc=proc, timeout=30)
        if metrics_port:
            wait_for_port(metrics_port, proc=proc, timeout=10)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


@contextlib.contextmanager
def celery_worker(env: dict[str, str], tmp: Path, concurrency: int = 2) -> Iterator[subprocess.Popen]:
    proc = spawn([VENV_PY, "-m", "celery", "-A", "controlplane", "worker", "--loglevel", "INFO",
                  "--concurrency", str(concurrency), "--without-gossip", "--without-mingle",
                  "--without-heartbeat"], env=env, log=tmp / "celery.log")
    try:
        time.sleep(0.5)
        if proc.poll() is not None:
            raise RuntimeError(f"celery worker exited early; see {tmp / 'celery.log'}")
        yield proc
    finally:
        stop(proc, grace=10)


@contextlib.contextmanager
def box_watcher(env: dict[str, str], tmp: Path) -> Iterator[subprocess.Popen]:
    """`manage.py boxwatcher` (controlplane.dispatch.watcher), up once it has reconciled and written its
    heartbeat."""
    heartbeat = tmp / "boxwatcher.heartbeat"
    heartbeat.unlink(missing_ok=True)
    proc = spawn([VENV_PY, "manage.py", "boxwatcher"],
                 env={**env, "ROSTER_BOXWATCHER_HEARTBEAT_FILE": str(heartbeat)}, log=tmp / "boxwatcher.log")
    try:
        deadline = time.monotonic() + 30
        while not heartbeat.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the box watcher did not come up; see {tmp / 'boxwatcher.log'}")
            time.sleep(0.1)
        yield proc
    finally:
        stop(proc, grace=10)
