"""The gateway-level token cap test again on a real PostgreSQL cluster (the decision API process and the
test share it): 64 concurrent streamed calls, zero overshoot."""

import os
import subprocess
import sys

import pytest

from tests.support import postgres, procs

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.slow]


def test_token_cap_through_the_gateway_on_postgresql():
    assert postgres.available(), "PostgreSQL 15 binaries are required (scripts/bootstrap.sh installs them)"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ROSTER_TEST_DB"))}
    with postgres.postgres_cluster() as url:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-s", "-x", "-p", "no:cacheprovider", "-m", "integration",
             "tests/integration/gateway/test_gateway_token_cap_concurrency.py"],
            cwd=procs.REPO, env={**env, "DATABASE_URL": url}, capture_output=True, text=True, timeout=600,
        )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "[gateway token cap, postgresql]" in proc.stdout and "overshoot 0" in proc.stdout
    print(next(line for line in proc.stdout.splitlines() if "[gateway token cap" in line))
