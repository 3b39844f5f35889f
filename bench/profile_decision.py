"""Where a decision's time goes in the database: every statement the decision service sends, per decision
and per outcome (allow with secret inject and budget reserve, deny no_grant, deny bad_token, ask, and the
outcome report that settles an allow), with its client-side time (a round trip on PostgreSQL), the
transactions, and how long the audit chain head is held: on PostgreSQL from pg_advisory_xact_lock to
the commit, on SQLite (BEGIN IMMEDIATE takes the database's write lock) from BEGIN to the commit. Then
the same allow decisions from 8 threads at once, for the lock's waits under contention. On PostgreSQL
pg_stat_statements adds the server's own count and execution time per statement (BEGIN and COMMIT
included), so the gap to the client's time is the round trips.

Same seed and databases as the decision bench (bench/bench_decision.py, bench/databases.py). Not part
of `make bench`: run `.venv/bin/python -m bench.profile_decision` (ROSTER_PROFILE_DECISIONS=N per
outcome, default 200; ROSTER_BENCH_DATABASES=sqlite or postgres for one; ROSTER_PROFILE_PYTHON=1 adds a
cProfile of the allow decisions on stderr)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench import bench_decision, databases
from bench.profile_capture import Capture, install

DECISIONS = int(os.environ.get("ROSTER_PROFILE_DECISIONS", 200))
WARMUP = 30
THREADS = 8
GROUP = 16  # decisions per group commit, as the decision API groups those that arrive together
PG_SETTINGS = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"}
ASK_HOST = "ask.profile.example"


# --- child side: Django set up on the seeded database ---

def _requests(seed: dict) -> dict[str, list]:
    from controlplane.egress import request
    from controlplane.policy.models import Grant

    Grant.objects.create(slug="profile-ask", host=ASK_HOST, schemes=["https"], mode=Grant.Mode.ASK)

    def build(token: str, **changes) -> request.EgressRequest:
        body = {**bench_decision._body(token, seed["sentinel"]), **changes}
        body["headers"] = tuple(tuple(h) for h in body["headers"])  # after changes: EgressRequest's type
        body["mcp"] = ()
        return request.EgressRequest(**body)

    tokens = seed["tokens"]
    # Without the sentinel: carried to a host whose grant does not name it, it would be a tripwire.
    plain = (("content-type", "application/json"),)
    return {
        "allow": [build(t) for t in tokens],
        "deny no_grant": [build(t, host="nowhere.profile.example", headers=plain) for t in tokens],
        "deny bad_token": [build("rt_" + secrets.token_urlsafe(24)) for _ in tokens],
        "ask": [build(t, host=ASK_HOST, path=f"/{i}", headers=plain) for i, t in enumerate(tokens)],
    }


def _pg_statements(reset: bool = False) -> list[tuple[str, int, float]]:
    from django.db import connection

    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cur:
        if reset:
            cur.execute("SELECT pg_stat_statements_reset()")
            return []
        cur.execute("SELECT query, calls, total_exec_time FROM pg_stat_statements WHERE query NOT ILIKE "
                    "'%pg_stat_statements%' ORDER BY calls DESC, total_exec_time DESC")
        return [(q, c, t) for q, c, t in cur.fetchall()]


def _profile_outcome(name: str, call, items: list, capture: Capture, per_call: int = 1) -> dict:
    """`call` on items in turn; `per_call` decisions each (a group), and every figure is per decision."""
    warmup = max(WARMUP // per_call, 2)
    for i in range(warmup):
        call(items[i % len(items)])
    _pg_statements(reset=True)
    capture.reset()
    walls = []
    calls = max(DECISIONS // per_call, 1)
    for i in range(calls):
        start = time.perf_counter()
        call(items[(warmup + i) % len(items)])  # after the warm-up's: each outcome settles once
        walls.append(time.perf_counter() - start)
    decisions = calls * per_call
    client = capture.summary(decisions)  # before the server's statistics are read, which are statements too
    server = [(q, c / decisions, t / c) for q, c, t in _pg_statements()]
    return {"name": name, "wall_ms": sum(walls) / decisions * 1000, **client, "server": server}


def _contended(items: list, capture: Capture) -> dict:
    """THREADS threads deciding allow at once, each on its own connection."""
    from django.db import connection

    from controlplane.egress import decide

    per_thread = max(DECISIONS // THREADS, 10)
    capture.reset()

    def work() -> None:
        with connection.execute_wrapper(capture.wrapper):
            for i in range(per_thread):
                answer = decide.decide(items[i % len(items)])
                if answer.decision.verdict != "allow":
                    raise RuntimeError(f"not allowed: {answer.decision.reason}")
        connection.close()

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return {"threads": THREADS, "decisions": per_thread * THREADS, "per_second": per_thread * THREADS / wall,
            **capture.summary(per_thread * THREADS)}


def _python_profile(items: list) -> None:
    """cProfile over allow decisions in groups of GROUP, as the decision API runs them, to stderr: the
    Python work between the statements, each decision judged before the lock (prepared_args) and
    the rest inside the group's transaction, so inside the chain head lock."""
    import cProfile
    import pstats

    from controlplane.egress import decide
    from controlplane.egress.db_thread import as_group, prepared_args

    profiler = cProfile.Profile()
    profiler.enable()
    for start in range(0, DECISIONS, GROUP):
        judged = [prepared_args(decide.decide, items[i % len(items)]) for i in range(start, start + GROUP)]
        with as_group():
            for args in judged:
                decide.decide(*args)
    profiler.disable()
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(45)
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)


def _bare_round_trip() -> float:
    """The floor under every statement: `SELECT 1` (a round trip on PostgreSQL), mean ms."""
    from django.db import connection

    with connection.cursor() as cur:
        start = time.perf_counter()
        for _ in range(DECISIONS):
            cur.execute("SELECT 1")
            cur.fetchone()
    return (time.perf_counter() - start) / DECISIONS * 1000


def _child(seed_file: str) -> None:
    from controlplane.egress.server import set_process_defaults

    set_process_defaults()  # the decision API's own settings (prepared statements on PostgreSQL)
    import django

    django.setup()
    from django.db import connection

    from controlplane.egress import decide, outcomes
    from controlplane.egress.db_thread import as_group, prepared_args

    seed = json.loads(Path(seed_file).read_text())
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    requests = _requests(seed)
    capture = install()
    allowed: list[str] = []

    def decide_allow(req) -> None:
        answer = decide.decide(req)
        if answer.decision.verdict != "allow":
            raise RuntimeError(f"not allowed: {answer.decision.reason}")
        allowed.append(answer.decision_id)

    def settle(decision_id: str) -> None:
        [result] = outcomes.outcomes_report([(decision_id, 200, 100, 200, "")])
        if result != "ok":
            raise RuntimeError(f"outcome not settled: {result}")

    def decide_group(group: list) -> None:
        """As the decision API's database thread runs a group: each judged before the lock, then one
        transaction, one commit."""
        judged = [prepared_args(decide.decide, req) for req in group]
        with as_group():
            for args in judged:
                if decide.decide(*args).decision.verdict != "allow":
                    raise RuntimeError("not allowed in a group")

    def settle_group(decision_ids: list[str]) -> None:
        with as_group():
            results = outcomes.outcomes_report([(d, 200, 100, 200, "") for d in decision_ids])
        if set(results) != {"ok"}:
            raise RuntimeError(f"outcomes not settled: {results}")

    results = []
    with connection.execute_wrapper(capture.wrapper):
        for name, items in requests.items():
            call = decide_allow if name == "allow" else decide.decide
            results.append(_profile_outcome(name, call, items, capture))
        pending = list(allowed)
        results.append(_profile_outcome("outcome report (1 per batch)", settle, pending, capture))
        allows = requests["allow"]
        groups = [[allows[(i * GROUP + j) % len(allows)] for j in range(GROUP)] for i in range(len(allows))]
        results.append(_profile_outcome(f"allow, groups of {GROUP}", decide_group, groups, capture, GROUP))
        # Fresh decisions to settle: the ones above are settled already.
        allowed.clear()
        for i in range((max(WARMUP // GROUP, 2) + max(DECISIONS // GROUP, 1)) * GROUP):
            decide_allow(allows[i % len(allows)])
        settled = [allowed[i:i + GROUP] for i in range(0, len(allowed) - GROUP + 1, GROUP)]
        results.append(_profile_outcome(f"outcome reports, groups of {GROUP}", settle_group, settled,
                                        capture, GROUP))
    contended = _contended(requests["allow"], capture)
    if os.environ.get("ROSTER_PROFILE_PYTHON"):
        _python_profile(requests["allow"])
    print(json.dumps({"vendor": connection.vendor, "outcomes": results, "contended": contended,
                      "bare_ms": _bare_round_trip()}))


# --- parent side ---

def _print(label: str, report: dict) -> None:
    pg = report["vendor"] == "postgresql"
    print(f"\n##### {label}: {DECISIONS} decisions per outcome, one thread (client-side times; "
          f"{'each statement is a round trip' if pg else 'in-process'})")
    print(f"{'outcome':<30} {'wall ms':>8} {'stmts':>6} {'trips':>6} {'txns':>5} {'sql ms':>7} "
          f"{'lock wait':>9} {'lock held':>9}")
    for r in report["outcomes"]:
        print(f"{r['name']:<30} {r['wall_ms']:>8.2f} {r['statements']:>6.1f} {r['round_trips']:>6.1f} "
              f"{r['transactions']:>5.1f} {r['sql_ms']:>7.2f} {r['lock_wait_ms']:>9.3f} "
              f"{r['lock_held_ms']:>9.3f}")
    print("(sql ms: time inside statements, BEGIN and COMMIT; lock held: chain head lock per decision, "
          f"{'pg_advisory_xact_lock to COMMIT' if pg else 'BEGIN IMMEDIATE to COMMIT'}; "
          f"a bare SELECT 1 takes {report['bare_ms']:.3f} ms)")
    for r in report["outcomes"]:
        print(f"\n  {r['name']}: statement (client side)                                   "
              f"per decision   mean ms")
        for sql, per, mean in r["statement_list"]:
            print(f"    {sql[:86]:<86} {per:>5.2f} {mean:>9.3f}")
        if r["server"]:
            print("    -- server side (pg_stat_statements): calls per decision, mean execution ms")
            for sql, per, mean in r["server"][:25]:
                print(f"    {' '.join(sql.split())[:86]:<86} {per:>5.2f} {mean:>9.3f}")
    c = report["contended"]
    print(f"\n  {c['threads']} threads, {c['decisions']} allow decisions: {c['per_second']:.0f} decisions/s; "
          f"chain lock wait {c['lock_wait_ms']:.2f} ms mean (p99 {c['lock_wait_p99_ms']:.2f}), held "
          f"{c['lock_held_ms']:.2f} ms mean (p99 {c['lock_held_p99_ms']:.2f}), {c['statements']:.1f} "
          f"statements per decision")


def main() -> None:
    service_token = "gst_profile_" + secrets.token_urlsafe(24)
    for kind in databases.available_databases("decision profile"):
        with tempfile.TemporaryDirectory(prefix="roster-profile-") as tmpdir, databases.database(
                kind, Path(tmpdir), pg_settings=PG_SETTINGS) as db:
            tmp = Path(tmpdir)
            env = bench_decision._env(tmp, service_token, db.url)
            subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
                           cwd=bench_decision.REPO, env=env, check=True)
            seed_file = tmp / "seed.json"
            seed_file.write_text(json.dumps(bench_decision._child(env, "--seed")))
            out = subprocess.run([sys.executable, "-m", "bench.profile_decision", "--child", str(seed_file)],
                                 cwd=bench_decision.REPO, env=env, check=True, stdout=subprocess.PIPE,
                                 text=True)
            _print(db.label, json.loads(out.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2])
    else:
        main()
