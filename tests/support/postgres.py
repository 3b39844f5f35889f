"""A throwaway PostgreSQL 15 cluster for DB-concurrency tests: initdb into a fresh temp directory,
listen on a free loopback port (and a socket in that directory), stop and delete it afterwards.
Root cannot run postgres, so the cluster runs as the `postgres` OS user when we are root."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from tests.support.procs import REPO, free_port, wait_for_port

PG_BIN = Path(os.environ.get("ROSTER_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_USER = "postgres"
START_TIMEOUT_SECONDS = 60


def available() -> bool:
    return (PG_BIN / "initdb").exists() and (PG_BIN / "pg_ctl").exists()


def _as_pg_user(args: list[str]) -> list[str]:
    return ["runuser", "-u", PG_USER, "--", *args] if os.geteuid() == 0 else args


def _run(args: list[str], timeout: float = START_TIMEOUT_SECONDS) -> None:
    proc = subprocess.run(_as_pg_user(args), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} failed ({proc.returncode}): {proc.stdout}\n{proc.stderr}")


@contextlib.contextmanager
def postgres_cluster(max_connections: int = 200, *, durable: bool = False,
                     settings: dict[str, str] | None = None) -> Iterator[str]:
    """Yield a DATABASE_URL for a superuser on a new cluster; the cluster is gone afterwards.
    Tests skip fsync (speed, nothing to keep); `durable=True` keeps PostgreSQL's own defaults (fsync and
    synchronous commit on), as a deployment runs it, for measuring. `settings` adds `-c name=value`s."""
    if not available():
        raise RuntimeError(f"PostgreSQL binaries not found under {PG_BIN}")
    # Under /tmp (not pytest's 0700 tmp_path), so the postgres user can reach it.
    root = Path(tempfile.mkdtemp(prefix="roster-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        pg = pwd.getpwnam(PG_USER)
        os.chown(root, pg.pw_uid, pg.pw_gid)
    port = free_port()
    try:
        _run([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", PG_USER, "--no-sync",
              "-E", "UTF8", "--locale=C"])
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c max_connections={max_connections}"
        if not durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        for name, value in (settings or {}).items():
            options += f" -c {name}={value}"
        _run([str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "server.log"),
              "-w", "-t", str(START_TIMEOUT_SECONDS), "start"])
        wait_for_port(port, timeout=START_TIMEOUT_SECONDS)
        yield f"postgres://{PG_USER}@127.0.0.1:{port}/postgres"
    finally:
        with contextlib.suppress(Exception):
            _run([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], timeout=30)
        time.sleep(0.1)
        shutil.rmtree(root, ignore_errors=True)


def rerun_on_postgresql(files: Sequence[str], *, args: Sequence[str] = (), timeout: float = 600,
                        cwd: Path | None = None, extra_env: dict[str, str] | None = None) -> str:
    """Run test files again in a child pytest against a throwaway cluster (DATABASE_URL), and fail with
    the child's tail unless it passed and ran on PostgreSQL (ROSTER_EXPECT_DB_VENDOR: tests/conftest.py
    refuses to start on another database). `extra_env`: settings for the child (the decision API's own,
    say). Returns the child's output."""
    assert available(), "PostgreSQL 15 binaries are required (scripts/bootstrap.sh installs them)"
    # Not this run's xdist worker, test database or plugin state: the child makes its own.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ROSTER_TEST_DB"))}
    with postgres_cluster() as url:
        env.update(DATABASE_URL=url, ROSTER_EXPECT_DB_VENDOR="postgresql", **(extra_env or {}))
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args,
                   *files]
        proc = subprocess.run(command, cwd=cwd or REPO, env=env, capture_output=True, text=True,
                              timeout=timeout)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout, output[-4000:]
    return proc.stdout
