"""The tests that depend on the database's behaviour, run again on a real PostgreSQL 15 server: per
suite a throwaway cluster and a child pytest whose DATABASE_URL points at it (tests.support.postgres).
SQLite serialises writers; PostgreSQL runs them in parallel under READ COMMITTED, with its own locking,
triggers (PL/pgSQL), constraints, JSON and time truncation, so each suite below is what those reach.
A test module that comes to depend on them joins its suite here."""

from __future__ import annotations

import pytest

from tests.support import postgres

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

SUITES = {
    # conditional UPDATEs under READ COMMITTED, real parallel connections
    "approvals": ["tests/approvals/test_concurrency.py"],
    # the token query, the policy-version triggers, the grants cache, the approval flow, group commit, the
    # journal's content-addressed bodies
    "decision API": [
        "tests/egress/test_decide.py", "tests/egress/test_policy_cache.py",
        "tests/egress/test_approval_flow.py", "tests/egress/test_outcome_trace.py",
        "tests/egress/test_model_call_decide.py", "tests/egress/test_group_commit.py",
        "tests/egress/test_gateway_calls.py", "tests/egress/test_budget_wait.py",
        "tests/egress/test_decide_under_lock.py", "tests/egress/test_group_held_rows.py",
        "tests/journal/test_store.py",
    ],
    # locking, triggers and time truncation of the ledger and the audit chain
    "ledger and audit": [
        "tests/ledger/test_concurrency.py", "tests/ledger/test_restart.py",
        "tests/ledger/test_model_concurrency.py", "tests/ledger/test_model_spend.py",
        "tests/ledger/test_cache_write_prices.py", "tests/ledger/test_reserve.py",
        "tests/ledger/test_history.py", "tests/ledger/test_selectors.py", "tests/ledger/test_overdue.py",
        "tests/ledger/test_exact_concurrency.py",
        "tests/audit/test_chain_concurrency.py", "tests/audit/test_triggers.py",
        "tests/audit/test_rewrite_paths.py", "tests/audit/test_checkpoints.py", "tests/audit/test_verify.py",
        "tests/audit/test_verify_parallel.py", "tests/audit/test_append.py", "tests/audit/test_edits.py",
        "tests/core/test_transaction_memo.py", "tests/audit/test_held_records.py",
    ],
    # locking, constraints and JSON of proposals
    "proposals": ["tests/proposals/test_concurrency.py", "tests/proposals/test_submit.py",
                  "tests/proposals/test_trust_and_cli.py", "tests/proposals/test_record.py"],
}


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_suite_on_postgresql(suite):
    postgres.rerun_on_postgresql(SUITES[suite])


def test_group_commit_on_postgresql_as_the_decision_api_runs_it():
    """The decision API's process runs PostgreSQL with prepared statements (server-side binding), and
    with them a group's writes go out in psycopg's pipeline (controlplane.core.db.pipelined): errors
    arrive late there, so the group and held-record tests run again on those settings."""
    out = postgres.rerun_on_postgresql(
        ["tests/egress/test_group_commit.py", "tests/audit/test_held_records.py",
         "tests/egress/test_group_held_rows.py", "tests/egress/test_judged_before_the_lock.py",
         "tests/egress/test_decide_under_lock.py", "tests/core/test_pipelined.py"],
        extra_env={"ROSTER_DB_PREPARED_STATEMENTS": "1"})
    assert " skipped" not in out


@pytest.mark.slow
def test_gateway_token_cap_on_postgresql():
    # 64 concurrent streamed calls through mitmdump and the decision API's processes, sharing the cluster.
    out = postgres.rerun_on_postgresql(["tests/integration/gateway/test_gateway_token_cap_concurrency.py"],
                                       args=["-s", "-x", "-m", "integration"])
    # The token cap with 1 and with 2 decision API processes, the exactly-N runs with 2: none overshoots,
    # none forks the chain.
    caps = [line for line in out.splitlines() if line.startswith("[gateway token cap, postgresql")]
    assert len(caps) == 2 and all("overshoot 0" in line and "; 0 chain forks" in line for line in caps), caps
    exact = [line for line in out.splitlines() if line.startswith("[exactly N, postgresql")]
    # c32, c64 x plain, streamed
    assert len(exact) == 4 and all("; 0 chain forks" in line for line in exact), exact
    for line in out.splitlines():
        if "[gateway token cap" in line or "[exactly N" in line:
            print(line)
