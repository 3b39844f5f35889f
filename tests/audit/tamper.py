"""Helpers that tamper with the stored chain the way an attacker with raw database access would:
first dropping the append-only triggers (inside the test's transaction, so they come back after)."""

from __future__ import annotations

from django.db import connection

from controlplane.audit import services as audit_services
from controlplane.audit import triggers
from controlplane.audit.models import AuditRecord


def raw(sql: str, params=()) -> None:
    with connection.cursor() as cur:
        cur.execute(sql, params)
    _as_another_connection()


def _as_another_connection() -> None:
    # An attacker writes through a connection of their own: the test's connection must not go on
    # trusting the chain head it remembers from its own appends in this transaction.
    audit_services._known_head.forget()


def drop_triggers() -> None:
    for sql in triggers.drop_sql(connection.vendor, "audit_auditrecord"):
        raw(sql)


def insert_record(seq, body, prev, digest, created_at, kind="decision", worker="", verdict="", run=None):
    AuditRecord.objects.create(seq=seq, created_at=created_at, kind=kind, run_id_ref=run, worker_name=worker,
                               verdict=verdict, reason="", body=body, prev_hash=prev, hash=digest)
    _as_another_connection()


def shift_seqs_from(first_seq: int, by: int) -> None:
    """Renumber seq >= first_seq (two steps, so the unique index never sees a duplicate)."""
    raw("UPDATE audit_auditrecord SET seq = -seq WHERE seq >= %s", [first_seq])
    raw("UPDATE audit_auditrecord SET seq = -seq + %s WHERE seq < 0", [by])


def restore_triggers() -> None:
    """Put the append-only triggers back (a transactional test's drop is committed, so it would last)."""
    triggers.install(connection, "audit_auditrecord")
