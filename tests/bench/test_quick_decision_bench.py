"""`make bench`'s decision bench end to end in quick mode (few requests; numbers not looked at): the
SQLite table with both servers (the decision API as 1 and as 2 processes) at both concurrencies, the
floors under them (a server doing no work, one durable commit), the in-process row and the target line
with the per-decision budget the floor leaves; without PostgreSQL's binaries, a "skipped: why" line
instead of the PostgreSQL table, and still a success."""

import os
import subprocess
import sys

import pytest

from tests.support import procs

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_quick_decision_bench_prints_its_rows(tmp_path):
    env = {**os.environ, "ROSTER_BENCH_QUICK": "1", "ROSTER_PG_BIN": str(tmp_path / "no-postgres"),
           "ROSTER_BENCH_DECISION_REQUESTS": "16"}
    env.pop("ROSTER_BENCH_DATABASES", None)
    proc = subprocess.run([sys.executable, "-m", "bench", "decision"], cwd=procs.REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "decision API bench on PostgreSQL 15: skipped: PostgreSQL 15 binaries not found" in out
    assert "decision API (SQLite, 50 workers, 500 grants" in out
    assert "decision API (PostgreSQL 15" not in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("decision API (1 process)",
                                                                        "decision API (2 processes)",
                                                                        "web server (daphne)",
                                                                        "floor: no work (uvicorn)"))]
    assert [(row[-6], row[-5]) for row in rows] == [("1", "16"), ("16", "32")] * 4
    assert any(line.startswith("in-process ") and "a group of one" in line for line in out.splitlines())
    assert any(line.startswith("in-process, outside a group ") for line in out.splitlines())
    [commit_floor] = [line.split() for line in out.splitlines()
                      if line.startswith("floor: one durable commit")]
    assert commit_floor[4] == "16" and float(commit_floor[5]) > 0
    assert "SQLite: decision API c16 " in out and " decisions/s with 1 process, " in out
    # 1500/s, or half the quick run's no-work floor when that is lower
    assert " with 2 (target >= " in out and " durable decisions/s: 1500, or half the no-work floor" in out
    assert " (target <= 1.0)" in out
    assert "the same server and client with no decision behind it: " in out
    assert " ms of server CPU at most for the target here" in out
    assert "failed" not in out
