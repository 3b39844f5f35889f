"""The ledger and audit tests that depend on the database's locking, triggers and time truncation, run
again against a real PostgreSQL 15 server: a throwaway cluster, and a child pytest whose DATABASE_URL
points at it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import postgres

REPO = Path(__file__).resolve().parents[2]
PG_SUITE = [
    "tests/ledger/test_concurrency.py", "tests/ledger/test_restart.py",
    "tests/ledger/test_model_concurrency.py", "tests/ledger/test_model_spend.py",
    "tests/ledger/test_cache_write_prices.py",
    "tests/ledger/test_reserve.py", "tests/ledger/test_history.py",
    "tests/ledger/test_selectors.py", "tests/audit/test_chain_concurrency.py", "tests/audit/test_triggers.py",
    "tests/audit/test_verify.py", "tests/audit/test_verify_parallel.py", "tests/audit/test_append.py",
    "tests/core/test_transaction_memo.py",
]
SUITE_TIMEOUT_SECONDS = 600


@pytest.mark.integration
@pytest.mark.postgres
def test_ledger_and_audit_suite_on_postgresql():
    assert postgres.available(), "PostgreSQL 15 binaries are required (scripts/bootstrap.sh installs them)"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ROSTER_TEST_DB"))}
    with postgres.postgres_cluster() as url:
        env.update(DATABASE_URL=url, ROSTER_EXPECT_DB_VENDOR="postgresql")
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *PG_SUITE]
        proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=SUITE_TIMEOUT_SECONDS)
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout and " failed" not in proc.stdout, tail
