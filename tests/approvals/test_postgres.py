"""The approval concurrency test again, on a real PostgreSQL cluster (conditional UPDATE under READ
COMMITTED, real parallel connections)."""

import subprocess
import sys

import pytest

from tests.support import postgres, procs

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def test_concurrent_consumers_on_postgresql():
    with postgres.postgres_cluster() as url:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
             "tests/approvals/test_concurrency.py"],
            cwd=procs.REPO, env={**__import__("os").environ, "DATABASE_URL": url},
            capture_output=True, text=True, timeout=300,
        )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 passed" in proc.stdout
