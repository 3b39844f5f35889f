"""Running tests.ledger.hammer in child processes against the current test database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from django.db import connection

REPO = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT_SECONDS = 120


def test_database_url() -> str:
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    if connection.vendor == "postgresql":
        auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
        return f"postgres://{auth}@{s['HOST']}:{s['PORT']}/{s['NAME']}"
    raise RuntimeError(f"no child URL for {connection.vendor}")


def spawn(*args: str) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": test_database_url(), "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "tests.ledger.hammer", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=CHILD_TIMEOUT_SECONDS)
    if proc.returncode != 0:
        raise AssertionError(f"child failed ({proc.returncode}): {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def run(*args: str):
    return result(spawn(*args))
