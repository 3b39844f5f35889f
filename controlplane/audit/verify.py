"""Verify the stored audit chain: re-hash stored bytes, follow prev links, check seq contiguity and
that the indexed columns agree with the body. Streams records; memory stays constant."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from controlplane.audit import chain
from controlplane.audit.models import AuditRecord

FIELDS = ("id", "seq", "body", "hash", "prev_hash", "created_at", "kind", "run_id_ref", "worker_name",
          "verdict", "reason")


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    checked: int
    message: str
    broken_seq: int | None = None
    head: str = chain.GENESIS_PREV


def verify_rows(rows) -> VerifyResult:
    """`rows` are tuples in FIELDS order, sorted by seq."""
    checker = chain.ChainChecker()
    for rec_id, seq, body, stored_hash, prev_col, created_at, kind, run, worker, verdict, reason in rows:
        columns = {"prev": prev_col, "time": chain.format_time(created_at), "kind": kind, "run": run,
                   "worker": worker, "verdict": verdict, "reason": reason}
        problem = checker.check(seq, body, stored_hash, columns)
        if problem is None and created_at != chain.truncate_ms(created_at):
            problem = "column 'time' has sub-millisecond digits the body does not"
        if problem:
            return VerifyResult(False, checker.checked, f"record seq {seq} (id {rec_id}): {problem}",
                                broken_seq=seq, head=checker.prev)
    return VerifyResult(True, checker.checked, f"OK: {checker.checked} records, head {checker.prev}",
                        head=checker.prev)


def verify_database() -> VerifyResult:
    rows = (AuditRecord.objects.order_by("seq").values_list(*FIELDS)
            .iterator(chunk_size=settings.ROSTER_AUDIT_CHUNK_SIZE))
    return verify_rows(rows)
