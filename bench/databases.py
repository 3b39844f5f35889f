"""The databases a bench runs on: SQLite (the single-machine default) and a throwaway PostgreSQL 15 cluster
(what compose deploys), started with PostgreSQL's own durable defaults (fsync and synchronous commit on),
so both measure decisions that survive a crash of the control plane.

ROSTER_BENCH_DATABASES=sqlite (or postgres) narrows the list; without PostgreSQL's binaries the PostgreSQL
rows print "skipped: why" and the SQLite rows stand. ROSTER_BENCH_QUICK=1 is for checking that the
benches run (few requests, numbers meaningless)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support import postgres

QUICK = os.environ.get("ROSTER_BENCH_QUICK", "") not in ("", "0")
# ROSTER_BENCH_PG_DURABLE=0: fsync and synchronous commit off, as the test suite's clusters run, to tell
# the WAL flush's share of a commit from the round trips'.
PG_DURABLE = os.environ.get("ROSTER_BENCH_PG_DURABLE", "1") != "0"
KINDS = ("sqlite", "postgres")
LABELS = {"sqlite": "SQLite", "postgres": "PostgreSQL 15"}


def count(env_name: str, full: int, quick: int) -> int:
    """A request count: the environment's value if set, else `quick` in quick mode, else `full`."""
    if os.environ.get(env_name):
        return int(os.environ[env_name])
    return quick if QUICK else full


@dataclass(frozen=True)
class Database:
    kind: str
    label: str
    url: str  # DATABASE_URL for the control plane's processes


def selected() -> list[str]:
    wanted = [k.strip() for k in os.environ.get("ROSTER_BENCH_DATABASES", ",".join(KINDS)).split(",")]
    unknown = set(wanted) - set(KINDS) - {""}
    if unknown:
        raise ValueError(f"ROSTER_BENCH_DATABASES: unknown {sorted(unknown)}; known: {', '.join(KINDS)}")
    return [k for k in KINDS if k in wanted]


def unavailable_reason(kind: str) -> str | None:
    if kind == "postgres" and not postgres.available():
        return (f"PostgreSQL 15 binaries not found under {postgres.PG_BIN} (install postgresql-15, or set "
                "ROSTER_PG_BIN)")
    return None


@contextlib.contextmanager
def database(kind: str, tmp: Path, pg_settings: dict[str, str] | None = None) -> Iterator[Database]:
    """A fresh, empty database of that kind (not yet migrated); gone afterwards. `pg_settings`: extra
    PostgreSQL settings (e.g. a preloaded extension)."""
    if kind == "sqlite":
        yield Database(kind, LABELS[kind], f"sqlite:///{tmp / 'bench.sqlite3'}")
        return
    with postgres.postgres_cluster(durable=PG_DURABLE, settings=pg_settings) as url:
        yield Database(kind, LABELS[kind] + ("" if PG_DURABLE else " (fsync off)"), url)


def available_databases(title: str) -> list[str]:
    """The selected kinds that can run here; prints a skipped line for each that cannot."""
    kinds = []
    for kind in selected():
        reason = unavailable_reason(kind)
        if reason:
            print(f"{title} on {LABELS[kind]}: skipped: {reason}", flush=True)
        else:
            kinds.append(kind)
    return kinds
