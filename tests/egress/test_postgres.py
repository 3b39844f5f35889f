"""The decision API's tests again on a real PostgreSQL cluster: the token query, the policy-version
triggers (PL/pgSQL), the grants cache and the approval flow."""

import os
import subprocess
import sys

import pytest

from tests.support import postgres, procs

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def test_decision_api_on_postgresql():
    files = ["tests/egress/test_decide.py", "tests/egress/test_policy_cache.py",
             "tests/egress/test_approval_flow.py", "tests/egress/test_outcome_trace.py",
             "tests/egress/test_model_call_decide.py", "tests/egress/test_group_commit.py",
             "tests/egress/test_fast_routes.py"]
    with postgres.postgres_cluster() as url:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *files],
            cwd=procs.REPO, env={**os.environ, "DATABASE_URL": url}, capture_output=True, text=True,
            timeout=600,
        )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout
