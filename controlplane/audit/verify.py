"""Verify the stored audit chain: re-hash stored bytes, follow prev links, check seq contiguity and
that the indexed columns agree with the body. Streams records; memory stays constant.

`row_problem` holds the rules and their messages. `verify_database` runs them over the whole chain:
in one pass (verify_scan's fast loop) or, for a long chain on a machine with several CPUs, over seq
ranges in worker processes (verify_parallel); both give exactly the result `verify_rows` gives."""

from __future__ import annotations

from dataclasses import dataclass

from controlplane.audit import chain
from controlplane.audit.verify_scan import FIELDS, Span, scan_range

__all__ = ["FIELDS", "VerifyResult", "row_problem", "verify_database", "verify_rows"]


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    checked: int
    message: str
    broken_seq: int | None = None
    head: str = chain.GENESIS_PREV


def row_problem(checker: chain.ChainChecker, row: tuple, anchor: tuple[int, str] | None) -> str | None:
    """The full message for a record (a tuple in FIELDS order, ORM-converted) that is not the sound
    next link after `checker`'s state, else None (and `checker` has moved past it)."""
    rec_id, seq, body, stored_hash, prev_col, created_at, kind, run, worker, verdict, reason = row
    columns = {"prev": prev_col, "time": chain.format_time(created_at), "kind": kind, "run": run,
               "worker": worker, "verdict": verdict, "reason": reason}
    problem = checker.check(seq, body, stored_hash, columns)
    if problem is None and created_at != chain.truncate_ms(created_at):
        problem = "column 'time' has sub-millisecond digits the body does not"
    if problem is None and anchor and seq == anchor[0] and stored_hash != anchor[1]:
        problem = f"anchor mismatch: hash is {stored_hash}, the anchor says {anchor[1]}"
    return f"record seq {seq} (id {rec_id}): {problem}" if problem else None


def _finish(checked: int, head: str, anchor: tuple[int, str] | None) -> VerifyResult:
    if anchor and checked < anchor[0]:
        return VerifyResult(False, checked, f"chain ends at seq {checked} but the anchor names seq "
                            f"{anchor[0]}: records were removed from the end", head=head)
    return VerifyResult(True, checked, f"OK: {checked} records, head {checked}:{head}", head=head)


def verify_rows(rows, anchor: tuple[int, str] | None = None) -> VerifyResult:
    """`rows` are tuples in FIELDS order, sorted by seq. `anchor` is a (seq, hash) noted from an
    earlier verification: the chain alone cannot show that its newest records were cut off, but a
    chain that no longer holds that record with that hash is broken."""
    checker = chain.ChainChecker()
    for row in rows:
        problem = row_problem(checker, row, anchor)
        if problem:
            return VerifyResult(False, checker.checked, problem, broken_seq=row[1], head=checker.prev)
    return _finish(checker.checked, checker.prev, anchor)


def result_of(checked_before: int, span: Span, anchor: tuple[int, str] | None) -> VerifyResult | None:
    """The final result if `span` (scanned from the true chain state) failed, else None."""
    if span.problem is None:
        return None
    return VerifyResult(False, checked_before + span.checked, span.problem, broken_seq=span.broken_seq,
                        head=span.end_prev)


def verify_sequential(anchor: tuple[int, str] | None = None) -> VerifyResult:
    span = scan_range(None, None, (1, chain.GENESIS_PREV), anchor)
    return result_of(0, span, anchor) or _finish(span.checked, span.end_prev, anchor)


def verify_database(anchor: tuple[int, str] | None = None, *, workers: int | None = None) -> VerifyResult:
    """Verify the whole stored chain. `workers` overrides ROSTER_AUDIT_VERIFY_WORKERS (0: one per CPU);
    a short chain, one CPU or an open transaction verify in this process."""
    from controlplane.audit import verify_parallel

    plan = verify_parallel.plan(workers)
    if plan is None:
        return verify_sequential(anchor)
    return verify_parallel.verify_in_parallel(plan, anchor)
