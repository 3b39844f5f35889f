"""The rules a stored audit record must meet, and their messages: re-hash the stored bytes, follow the
prev link, seq contiguity, the indexed columns agree with the body, an anchor from an earlier verify.
`verify_rows` is the plain sequential walk; the faster walks (verify_scan, verify_parallel) defer to
`row_problem` for every record they are not sure about, so all of them say the same."""

from __future__ import annotations

from dataclasses import dataclass

from controlplane.audit import chain

FIELDS = ("id", "seq", "body", "hash", "prev_hash", "created_at", "kind", "run_id_ref", "worker_name",
          "verdict", "reason")


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    checked: int
    message: str
    broken_seq: int | None = None
    head: str = chain.GENESIS_PREV


def row_problem(checker: chain.ChainChecker, row: tuple, anchor: tuple[int, str] | None) -> str | None:
    """The full message for a record (a tuple in FIELDS order, ORM-converted) that is not the sound
    next link after `checker`'s state, else None. Some rules judge the record after the checker has
    moved past it, so on a problem the checker may already count it."""
    rec_id, seq, body, stored_hash, prev_col, created_at, kind, run, worker, verdict, reason = row
    columns = {"prev": prev_col, "time": chain.format_time(created_at), "kind": kind, "run": run,
               "worker": worker, "verdict": verdict, "reason": reason}
    problem = checker.check(seq, body, stored_hash, columns)
    if problem is None and created_at != chain.truncate_ms(created_at):
        problem = "column 'time' has sub-millisecond digits the body does not"
    if problem is None and anchor and seq == anchor[0] and stored_hash != anchor[1]:
        problem = f"anchor mismatch: hash is {stored_hash}, the anchor says {anchor[1]}"
    return f"record seq {seq} (id {rec_id}): {problem}" if problem else None


def finish(checked: int, head: str, anchor: tuple[int, str] | None) -> VerifyResult:
    """The result for a chain whose every record passed."""
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
    return finish(checker.checked, checker.prev, anchor)
