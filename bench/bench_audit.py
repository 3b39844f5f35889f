"""Audit chain benchmark: append throughput (the decision path appends one record per request) and
the time to verify a chain of one million records with the real verifier.

Runs in a child process against a throwaway SQLite database (never the dev database: audit records
can't be deleted), and, when PostgreSQL 15 binaries are installed, against a throwaway cluster. The
chain is verified twice: in one process, then in worker processes (the default on several CPUs).
ROSTER_BENCH_AUDIT_RECORDS overrides the chain length (default 1,000,000)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHAIN_RECORDS = int(os.environ.get("ROSTER_BENCH_AUDIT_RECORDS", "1000000"))
APPENDS = int(os.environ.get("ROSTER_BENCH_AUDIT_APPENDS", "2000"))
THREADS = 8
INSERT_BATCH = 10_000


def _child_env(database_url: str) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            "PYTHONPATH": str(REPO)}


def _child(database_url: str, *args: str) -> dict:
    env = _child_env(database_url)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env,
                   check=True)
    out = subprocess.run([sys.executable, "-m", "bench.bench_audit", "--child", *args], cwd=REPO, env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# --- child side (Django configured against the throwaway database) ---

def _append_rate(count: int, threads: int) -> float:
    from django.db import connection, transaction

    from controlplane.audit.services import audit_append

    def work(n: int) -> None:
        try:
            for i in range(n):
                with transaction.atomic():
                    audit_append("decision", {"host": "api.example.com", "i": i}, worker="bench",
                                 verdict="allow")
        finally:
            connection.close()

    per = count // threads
    pool = [threading.Thread(target=work, args=(per,)) for _ in range(threads)]
    started = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return per * threads / (time.perf_counter() - started)


def _bulk_extend(total: int) -> float:
    """Extend the chain to `total` records by inserting precomputed chained bodies (sqlite3 directly,
    or COPY on PostgreSQL)."""
    import datetime as dt
    import sqlite3

    from django.db import connection

    from controlplane.audit import chain
    from controlplane.audit.models import AuditRecord

    head = AuditRecord.objects.order_by("-seq").values_list("seq", "hash").first() or (0, chain.GENESIS_PREV)
    if connection.vendor == "postgresql":
        return _copy_extend(total, head)
    path = connection.settings_dict["NAME"]
    connection.close()
    started = time.perf_counter()
    db = sqlite3.connect(path)
    db.execute("PRAGMA synchronous=OFF")
    rows = chain.generate_chain(total - head[0], dt.datetime.now(dt.UTC), start_seq=head[0] + 1, prev=head[1])
    sql = ("INSERT INTO audit_auditrecord (seq, created_at, kind, run_id_ref, worker_name, verdict, reason, "
           "body, prev_hash, hash) VALUES (?, ?, ?, NULL, '', '', '', ?, ?, ?)")
    batch = []
    for seq, moment, kind, body, prev, digest in rows:
        batch.append((seq, moment.strftime("%Y-%m-%d %H:%M:%S.%f"), kind, body, prev, digest))
        if len(batch) == INSERT_BATCH:
            db.executemany(sql, batch)
            batch.clear()
    db.executemany(sql, batch)
    db.commit()
    db.close()
    return time.perf_counter() - started


def _copy_extend(total: int, head: tuple[int, str]) -> float:
    import datetime as dt

    from django.db import connection

    from controlplane.audit import chain

    started = time.perf_counter()
    rows = chain.generate_chain(total - head[0], dt.datetime.now(dt.UTC), start_seq=head[0] + 1, prev=head[1])
    sql = ("COPY audit_auditrecord (seq, created_at, kind, run_id_ref, worker_name, verdict, reason, body, "
           "prev_hash, hash) FROM STDIN")
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for seq, moment, kind, body, prev, digest in rows:
            copy.write_row((seq, moment, kind, None, "", "", "", body, prev, digest))
    connection.close()
    return time.perf_counter() - started


def child_main(args: list[str]) -> None:
    import django

    django.setup()
    from controlplane.audit.verify import verify_database

    result = {"append_1": _append_rate(APPENDS, 1), f"append_{THREADS}": _append_rate(APPENDS, THREADS)}
    if "--chain" in args:
        from controlplane.audit.verify_parallel import plan

        result["build_seconds"] = _bulk_extend(CHAIN_RECORDS)
        # In this process, then over seq ranges in worker processes (the default on several CPUs).
        for name, workers in (("sequential", 1), ("parallel", None)):
            work = plan(workers)
            started = time.perf_counter()
            verified = verify_database(workers=workers)
            result[name] = {"seconds": time.perf_counter() - started, "verified": verified.checked,
                            "ok": verified.ok, "workers": work.workers if work else 1}
        result["checkpoint"] = _checkpoint_cost()
    print(json.dumps(result))


def _checkpoint_cost() -> dict:
    """One Ed25519 signature of a checkpoint statement, and a whole `audit checkpoint` (which verifies
    the chain first) on the benchmark chain; key and log in a throwaway directory."""
    from django.conf import settings

    from controlplane.audit import checkpoints
    from controlplane.audit.checkpoint_format import canonical

    tmp = Path(tempfile.mkdtemp(prefix="roster-bench-checkpoint-"))
    settings.ROSTER_AUDIT_CHECKPOINT_KEY_FILE = tmp / "checkpoint.key"
    settings.ROSTER_AUDIT_CHECKPOINT_LOG = tmp / "checkpoints.jsonl"
    started = time.perf_counter()
    statement = checkpoints.make_checkpoint(by="bench")
    whole = time.perf_counter() - started
    key = checkpoints._load_key()
    signs = 2000
    started = time.perf_counter()
    for _ in range(signs):
        key.sign(canonical(statement))
    return {"sign_us": (time.perf_counter() - started) / signs * 1e6, "whole_seconds": whole,
            "seq": statement["seq"]}


# --- parent side ---

def _rows(result: dict, db: str) -> list[tuple[str, str]]:
    rows = [(f"append, 1 writer ({db})", f"{result['append_1']:,.0f} records/s"),
            (f"append, {THREADS} threads ({db})", f"{result[f'append_{THREADS}']:,.0f} records/s"),
            (f"build chain of {CHAIN_RECORDS:,} ({db}, bulk insert)", f"{result['build_seconds']:.1f} s")]
    for name in ("sequential", "parallel"):
        run = result[name]
        rows.append((f"verify {run['verified']:,} records ({db}), {name}, {run['workers']} process"
                     f"{'es' if run['workers'] > 1 else ''}",
                     f"{run['seconds']:.1f} s ({run['verified'] / run['seconds']:,.0f} records/s, "
                     f"{'OK' if run['ok'] else 'BROKEN'})"))
    cp = result["checkpoint"]
    rows.append((f"checkpoint signature, Ed25519 ({db})", f"{cp['sign_us']:.0f} µs"))
    rows.append((f"audit checkpoint of {cp['seq']:,} records ({db}, verify + sign + log + record)",
                 f"{cp['whole_seconds']:.1f} s"))
    # Side by side: what a checkpoint adds to the verify it starts with (signing is microseconds; the
    # verify is nearly all of a checkpoint, docs/audit.md).
    verify = result["sequential"]["seconds"]
    rows.append((f"checkpoint signing vs verify ({db})",
                 f"sign {cp['sign_us'] / 1000:.2f} ms vs verify {verify:.1f} s "
                 f"(sign is {cp['sign_us'] / 1e6 / verify:.4%} of a sequential verify)"))
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="roster-bench-audit-") as tmp:
        results = {"SQLite": _child(f"sqlite:///{Path(tmp) / 'bench.sqlite3'}", "--chain")}
    sys.path.insert(0, str(REPO))
    from tests.support import postgres

    if postgres.available():
        with postgres.postgres_cluster() as url:
            results["PostgreSQL"] = _child(url, "--chain")
    rows = [row for db, result in results.items() for row in _rows(result, db)]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)}  value")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    if not all(r[name]["ok"] for r in results.values() for name in ("sequential", "parallel")):
        raise RuntimeError("the benchmark chain did not verify")


if __name__ == "__main__":
    if "--child" in sys.argv:
        child_main(sys.argv[1:])
    else:
        main()
