"""Appending to the audit chain. Every state change calls audit_append inside its own transaction, so
the record commits or rolls back with the change it records."""

from __future__ import annotations

import enum

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from controlplane.audit import chain
from controlplane.audit.metrics import APPEND_SECONDS
from controlplane.audit.models import AuditRecord
from controlplane.core import held_rows
from controlplane.core.db import TransactionMemo, current_connection, in_transaction

KINDS = frozenset({
    "decision", "tripwire", "approval", "spend", "credential_use", "grant_change", "run_state", "trace",
    "secret_change", "connection", "proposal", "login_lockout", "cap_change", "dry_run",
    # Conversations (controlplane.conversations): what a run's input carried, messages stored or refused,
    # replies delivered, approval posts and what was done (or ignored) on them, channel configuration.
    "run_input", "message", "delivery", "chat_approval", "channel_change",
    # Presets and workers' agent settings (controlplane.agents): created, changed, deleted.
    "agent_change",
    # A worker's own admin edit (its name, description, identity, active), under that worker.
    "worker_change",
    # The worker's notes (controlplane.memory): written, corrected, forgotten (hashes, never the text).
    "memory",
    # The worker's knowledge (controlplane.knowledge): a run's change committed, or refused at collection
    # (paths and hashes, never a file's content).
    "knowledge",
    # A repair naming the run it repairs (`repairs`): a run's notes forgotten, its task requeued, its
    # knowledge commits reverted.
    "repair",
    # The vault key's rotation (controlplane.vault.rotation): started, resumed, finished; key ids only.
    "vault_key",
    # The run journal (controlplane.journal): a model call stored, bodies erased (hashes, never bytes).
    "journal",
    # A signed checkpoint of the chain (controlplane.audit.checkpoints), also in the checkpoint log.
    "checkpoint",
})
# Column widths of the indexed copies (AuditRecord); checked here so SQLite and PostgreSQL agree.
_MAX_WORKER, _MAX_VERDICT, _MAX_REASON = 64, 16, 32
# Any constant identifies "the audit chain head" among advisory locks; this is "roster.audit".
_PG_LOCK_KEY = 0x726F737465722E61


def _text(value, name: str, limit: int) -> str:
    if value is None:
        return ""
    if isinstance(value, enum.Enum):
        value = value.value
    if not isinstance(value, str):
        raise TypeError(f"audit {name} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise ValueError(f"audit {name} longer than {limit} characters")
    return value


def _run_id(run) -> int | None:
    if run is None:
        return None
    run_id = run if isinstance(run, int) else run.pk
    if not isinstance(run_id, int) or isinstance(run_id, bool):
        raise TypeError("audit run must be a Run or its integer id")
    return run_id


def _worker_name(worker, run) -> str:
    if worker is None:
        # A Run instance names its worker (cached on the instance after the first access).
        return run.worker.name if run is not None and not isinstance(run, int) else ""
    return _text(worker if isinstance(worker, str) else worker.name, "worker", _MAX_WORKER)


# Within one transaction the chain lock is taken once and the head is known after the first append, so
# a group of decisions (controlplane.egress.db_thread) pays for neither again; both memos are forgotten
# with the transaction, or with the savepoint they were set in (a savepoint's rollback also releases
# a lock taken inside it, and removes the records appended inside it).
_lock_held = TransactionMemo()
_known_head = TransactionMemo()


def lock_chain_head(conn=None) -> None:
    """Serialise appenders. SQLite: the settings begin every transaction IMMEDIATE, so this transaction
    already holds the database write lock. PostgreSQL: a transaction-scoped advisory lock. `conn`: this
    thread's connection when the caller has it at hand."""
    conn = conn or current_connection()
    if conn.vendor == "postgresql":
        if _lock_held.get(conn):
            return
        with conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", [_PG_LOCK_KEY])
        _lock_held.set(True, conn)
    elif conn.vendor == "sqlite":
        if conn.settings_dict.get("OPTIONS", {}).get("transaction_mode") != "IMMEDIATE":
            raise RuntimeError("SQLite must use transaction_mode IMMEDIATE (see settings.py)")
    else:
        raise RuntimeError(f"audit chain locking not implemented for {conn.vendor}")


_TABLE = AuditRecord._meta.db_table
# _append builds the record positionally, so its order must be the model's own.
_COLUMNS = ("id", "seq", "created_at", "kind", "run_id_ref", "worker_name", "verdict", "reason", "body",
            "prev_hash", "hash")
if tuple(field.attname for field in AuditRecord._meta.concrete_fields) != _COLUMNS:
    raise ImproperlyConfigured("AuditRecord's columns changed order: update audit.services._COLUMNS")
_HEAD_SQL = f"SELECT seq, hash FROM {_TABLE} ORDER BY seq DESC LIMIT 1"
_INSERT_PREFIX = (f"INSERT INTO {_TABLE} (seq, created_at, kind, run_id_ref, worker_name, verdict, reason, "
                  f"body, prev_hash, hash) VALUES ")
_ROW_VALUES = "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
_INSERT_SQL = _INSERT_PREFIX + _ROW_VALUES + " RETURNING id"
# A group's records, held for its one INSERT (controlplane.core.held_rows).
HELD = held_rows.HeldTable(_TABLE, _INSERT_PREFIX, _ROW_VALUES)


def _held_head(conn) -> tuple[int, str] | None:
    newest = HELD.last(conn)
    return (newest[0], newest[-1]) if newest else None  # seq is the first column, hash the last


def _head(conn, cur) -> tuple[int, str] | None:
    """The chain's head as this transaction has it: the newest record held for the group's INSERT, else
    the one this transaction appended last, else the stored head."""
    head = _held_head(conn) or _known_head.get(conn)
    if head is None:
        cur.execute(_HEAD_SQL)
        head = cur.fetchone()
    return head


def _append(conn, kind: str, data_json: str, run_id: int | None, worker: str, verdict: str,
            reason: str, *, row_needed: bool = True) -> tuple | None:
    """Inside the chain head lock: only the head, seq, time, hashing and the insert. The record's row,
    in _COLUMNS order. Plain SQL: this runs once per gateway request, and the ORM's save() costs more
    than the hashing. `row_needed` False (audit_write): inside a group's holding() block the record is
    held for the group's one INSERT (controlplane.core.held_rows) and nothing is returned."""
    lock_chain_head(conn)
    now = chain.truncate_ms(timezone.now())
    with conn.cursor() as cur:
        head = _head(conn, cur)
        seq, prev = (head[0] + 1, head[1]) if head else (1, chain.GENESIS_PREV)
        body = chain.body_with_data(seq=seq, time=now, prev=prev, kind=kind, run=run_id, worker=worker,
                                    verdict=verdict, reason=reason, data_json=data_json)
        digest = chain.record_hash(body)
        params = [seq, conn.ops.adapt_datetimefield_value(now), kind, run_id, worker, verdict, reason, body,
                  prev, digest]
        if not row_needed and HELD.hold(conn, params):
            return None
        # Stored in chain order: records held before this one go in first.
        HELD.write_now(conn)
        cur.execute(_INSERT_SQL, params)
        pk = cur.fetchone()[0]
    _known_head.set((seq, digest), conn)
    return pk, seq, now, kind, run_id, worker, verdict, reason, body, prev, digest


def _prepared(kind: str, data: dict, run, worker, verdict: str, reason: str) -> tuple:
    """Everything about a record that does not need the chain head, checked and serialised before the
    lock is taken: (kind, data's canonical JSON, run id, worker name, verdict, reason)."""
    if kind not in KINDS:
        raise ValueError(f"unknown audit kind {kind!r}")
    if not isinstance(data, dict):
        raise TypeError("audit data must be a dict")
    verdict = _text(verdict, "verdict", _MAX_VERDICT)
    reason = _text(reason, "reason", _MAX_REASON)
    worker_name = _worker_name(worker, run)
    # Serialised once, here: fails before the lock if data can't be, and the body embeds these bytes.
    return kind, chain.canonical_json(data), _run_id(run), worker_name, verdict, reason


def audit_append(kind: str, data: dict, *, run=None, worker=None, verdict: str = "",
                 reason: str = "") -> AuditRecord:
    """Append one record to the chain. Call inside the transaction of the change it records; called
    outside one, it opens its own. `data` must be JSON-serialisable and never hold a secret value."""
    prepared = _prepared(kind, data, run, worker, verdict, reason)
    conn = current_connection()
    with in_transaction(conn), APPEND_SECONDS.time():
        row = _append(conn, *prepared)
    # As the ORM builds a row it read (positional, in column order): half the cost of keyword arguments.
    return AuditRecord.from_db(conn.alias, _COLUMNS, row)


def audit_write(kind: str, data: dict, *, run=None, worker=None, verdict: str = "",
                reason: str = "") -> None:
    """audit_append for a caller that needs nothing back (the decision path's records): the same record,
    appended the same way, without building an AuditRecord from it."""
    prepared = _prepared(kind, data, run, worker, verdict, reason)
    conn = current_connection()
    with in_transaction(conn), APPEND_SECONDS.time():
        _append(conn, *prepared, row_needed=False)
