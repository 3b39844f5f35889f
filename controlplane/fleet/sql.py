"""The fleet tables' plain SQL on the decision path (once per gateway call): the ORM's query building costs
more than these indexed statements themselves (docs/operations.md, "Benchmarks"). Every statement on
fleet's tables that another app needs at that speed lives here, behind a named function; table and column
names come from the models, so a renamed table or column is renamed here too."""

from __future__ import annotations

from django.utils import timezone

from controlplane.core.db import current_connection
from controlplane.core.held_rows import HeldTable
from controlplane.fleet.models import PolicyVersion, Run, RunDecision, Worker


def _in_model_order(model, names: set[str]) -> tuple[str, ...]:
    # Model.from_db takes the values of the fields it is given in the model's own field order.
    return tuple(f.attname for f in model._meta.concrete_fields if f.attname in names)


# box_address: the caller checks the token came from the run's box (controlplane.fleet.tokens).
_RUN_FIELDS = _in_model_order(Run, {"id", "worker_id", "origin", "status", "taint", "untrusted",
                                    "box_address"})
_WORKER_FIELDS = _in_model_order(Worker, {"id", "name", "active"})
_LIVE = tuple(Run.LIVE_STATUSES)
_LIVE_RUN_SQL = (
    "SELECT " + ", ".join(f"r.{name}" for name in _RUN_FIELDS) + ", w.name{version}"
    f" FROM {Run._meta.db_table} r JOIN {Worker._meta.db_table} w ON w.id = r.worker_id"
    " WHERE r.token_hash = %s AND w.active AND r.status IN (" + ", ".join(["%s"] * len(_LIVE)) + ")")
_POLICY_VERSION_COLUMN = f", (SELECT version FROM {PolicyVersion._meta.db_table} WHERE id = 1)"
_LIVE_RUN_WITH_VERSION_SQL = _LIVE_RUN_SQL.format(version=_POLICY_VERSION_COLUMN)
_LIVE_RUN_ONLY_SQL = _LIVE_RUN_SQL.format(version="")

_RUN_DECISION_TABLE = RunDecision._meta.db_table
_INSERT_RUN_DECISION_PREFIX = (
    f"INSERT INTO {_RUN_DECISION_TABLE} (decision_id, run_id, grant_slug, result_class, untrusted, "
    "trace, method, url, created_at, traced, secret_name, response_sha256) VALUES ")
_RUN_DECISION_VALUES = "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, '')"
_INSERT_RUN_DECISION_SQL = _INSERT_RUN_DECISION_PREFIX + _RUN_DECISION_VALUES
# A group's run decisions, held for one INSERT at its end (controlplane.core.held_rows).
_HELD_RUN_DECISIONS = HeldTable(_RUN_DECISION_TABLE, _INSERT_RUN_DECISION_PREFIX, _RUN_DECISION_VALUES)
_RUN_DECISION_FOR_OUTCOME_SQL = (f"SELECT id, outcome_at, run_id, grant_slug, secret_name, url "
                                 f"FROM {_RUN_DECISION_TABLE} WHERE decision_id = %s")
_RUN_DECISION_FOR_JOURNAL_SQL = (
    f"SELECT d.run_id, d.grant_slug, w.name FROM {_RUN_DECISION_TABLE} d"
    f" JOIN {Run._meta.db_table} r ON r.id = d.run_id JOIN {Worker._meta.db_table} w ON w.id = r.worker_id"
    " WHERE d.decision_id = %s")
_MARK_OUTCOME_SQL = (f"UPDATE {_RUN_DECISION_TABLE} SET outcome_at = %s, outcome_status = %s, "
                     "response_sha256 = %s WHERE id = %s")


def live_run_by_token_hash(digest: str, *, with_policy_version: bool = False) -> Run | None:
    """The live run (of an active worker) whose token hashes to `digest`, or None: one statement, with its
    worker's name (and, asked, the policy version). The Run and its Worker hold only the decision-relevant
    columns; any other is read from the database if asked for (Django's deferred fields)."""
    conn = current_connection()
    with conn.cursor() as cursor:
        cursor.execute(_LIVE_RUN_WITH_VERSION_SQL if with_policy_version else _LIVE_RUN_ONLY_SQL,
                       [digest, *_LIVE])
        row = cursor.fetchone()
    if row is None:
        return None
    width = len(_RUN_FIELDS)
    run = Run.from_db(conn.alias, _RUN_FIELDS, row[:width])
    run.untrusted = bool(run.untrusted)  # SQLite answers 0/1
    worker = {"id": run.worker_id, "name": row[width], "active": True}
    run.worker = Worker.from_db(conn.alias, _WORKER_FIELDS, [worker[name] for name in _WORKER_FIELDS])
    if with_policy_version:
        run.policy_version = row[width + 1]
    return run


def run_decision_insert(*, decision_id: str, run_id: int, grant_slug: str, result_class: int, untrusted: bool,
                        trace: bool, method: str, url: str, secret_name: str) -> None:
    """The run decision an allow writes in its transaction, for the outcome to settle."""
    conn = current_connection()
    params = [decision_id, run_id, grant_slug, result_class, untrusted, trace, method, url,
              conn.ops.adapt_datetimefield_value(timezone.now()), False, secret_name]
    if _HELD_RUN_DECISIONS.hold(conn, params):
        return
    with conn.cursor() as cur:
        cur.execute(_INSERT_RUN_DECISION_SQL, params)


def run_decision_for_outcome(decision_id: str) -> tuple | None:
    """(id, outcome_at, run_id, grant_slug, secret_name, url) of the run decision, locked for the rest of
    the transaction where the database can; None for an unknown id."""
    conn = current_connection()
    lock = " FOR UPDATE" if conn.features.has_select_for_update else ""
    with conn.cursor() as cur:
        cur.execute(_RUN_DECISION_FOR_OUTCOME_SQL + lock, [decision_id])
        return cur.fetchone()


def run_decision_for_journal(decision_id: str) -> tuple | None:
    """(run_id, grant_slug, worker name) of the allowed decision a journaled call names; None for an
    unknown id."""
    with current_connection().cursor() as cur:
        cur.execute(_RUN_DECISION_FOR_JOURNAL_SQL, [decision_id])
        return cur.fetchone()


def run_decision_mark_outcome(record_id: int, status: int, response_sha256: str = "") -> None:
    conn = current_connection()
    with conn.cursor() as cur:
        cur.execute(_MARK_OUTCOME_SQL,
                    [conn.ops.adapt_datetimefield_value(timezone.now()), status, response_sha256, record_id])
