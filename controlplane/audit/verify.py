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


def verify_rows(rows, anchor: tuple[int, str] | None = None) -> VerifyResult:
    """`rows` are tuples in FIELDS order, sorted by seq. `anchor` is a (seq, hash) noted from an
    earlier verification: the chain alone cannot show that its newest records were cut off, but a
    chain that no longer holds that record with that hash is broken."""
    checker = chain.ChainChecker()
    for rec_id, seq, body, stored_hash, prev_col, created_at, kind, run, worker, verdict, reason in rows:
        columns = {"prev": prev_col, "time": chain.format_time(created_at), "kind": kind, "run": run,
                   "worker": worker, "verdict": verdict, "reason": reason}
        problem = checker.check(seq, body, stored_hash, columns)
        if problem is None and created_at != chain.truncate_ms(created_at):
            problem = "column 'time' has sub-millisecond digits the body does not"
        if problem is None and anchor and seq == anchor[0] and stored_hash != anchor[1]:
            problem = f"anchor mismatch: hash is {stored_hash}, the anchor says {anchor[1]}"
        if problem:
            return VerifyResult(False, checker.checked, f"record seq {seq} (id {rec_id}): {problem}",
                                broken_seq=seq, head=checker.prev)
    if anchor and checker.checked < anchor[0]:
        return VerifyResult(False, checker.checked, f"chain ends at seq {checker.checked} but the anchor "
                            f"names seq {anchor[0]}: records were removed from the end", head=checker.prev)
    n = checker.checked
    return VerifyResult(True, n, f"OK: {n} records, head {n}:{checker.prev}", head=checker.prev)


def verify_database(anchor: tuple[int, str] | None = None) -> VerifyResult:
    rows = (AuditRecord.objects.order_by("seq").values_list(*FIELDS)
            .iterator(chunk_size=settings.ROSTER_AUDIT_CHUNK_SIZE))
    return verify_rows(rows, anchor)
