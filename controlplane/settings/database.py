"""The database: SQLite under var/ on one machine, PostgreSQL from DATABASE_URL (compose, at scale)."""

import os

import dj_database_url

from controlplane.core.env import env
from controlplane.settings.base import VAR_DIR

DATABASES = {
    "default": dj_database_url.parse(
        env.str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'roster.sqlite3'}"), conn_max_age=60
    )
}
ROSTER_SQLITE_WAL_AUTOCHECKPOINT_PAGES = env.int("ROSTER_SQLITE_WAL_AUTOCHECKPOINT_PAGES", 4000, minimum=0)
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # IMMEDIATE makes every transaction take the write lock up front, so two writers can never read
    # the same chain head or ledger total and both append (the chain and the caps rely on this).
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        # A WAL checkpoint (copy back + fsync) runs inside the commit that crosses the threshold: at
        # SQLite's default of 1000 pages that was a ~10 ms stall every ~30 decisions (0.3 ms each on
        # average); 4000 pages stalls a quarter as often, ~25 ms each.
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                        f"PRAGMA wal_autocheckpoint={ROSTER_SQLITE_WAL_AUTOCHECKPOINT_PAGES};",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A file (not :memory:) so servers started by tests can share it; one per process so parallel
    # runs don't collide.
    DATABASES["default"].setdefault("TEST", {})["NAME"] = env.str(
        "ROSTER_TEST_DB", str(VAR_DIR / f"test-roster-{os.getpid()}.sqlite3")
    )

# Prepared statements on PostgreSQL (server-side parameter binding; psycopg prepares a statement from
# its fifth use on a connection): the decision API's process turns them on (controlplane.decision_server),
# where the same few statements run for every request and parsing and planning them again cost as much
# as running them (docs/operations.md, "Benchmarks"). Off elsewhere, and "0" turns them off there too
# (behind a transaction-mode connection pooler, which cannot keep a session's prepared statements).
ROSTER_DB_PREPARED_STATEMENTS = env.bool("ROSTER_DB_PREPARED_STATEMENTS", False)
if ROSTER_DB_PREPARED_STATEMENTS and DATABASES["default"]["ENGINE"].endswith("postgresql"):
    DATABASES["default"].setdefault("OPTIONS", {}).update(server_side_binding=True, prepare_threshold=5)
