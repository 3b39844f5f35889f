"""Verify the stored audit chain: re-hash stored bytes, follow prev links, check seq contiguity and
that the indexed columns agree with the body. Streams records; memory stays constant.

The rules and their messages are in controlplane.audit.chain (shared with the standalone export
verifier). `verify_database` runs them over the whole chain in one pass (verify_scan's fast loop) or, for
a long chain on a machine with several CPUs, over seq ranges in worker processes (verify_parallel);
either way the result is the one `verify_rows` gives."""

from __future__ import annotations

from controlplane.audit import chain, verify_parallel
from controlplane.audit.chain import FIELDS, VerifyResult, finish, row_problem, verify_rows
from controlplane.audit.verify_scan import scan_range

__all__ = ["FIELDS", "VerifyResult", "row_problem", "verify_database", "verify_rows", "verify_sequential"]


def verify_sequential(anchor: tuple[int, str] | None = None) -> VerifyResult:
    """The whole chain in this process, in one pass."""
    span = scan_range(None, None, (1, chain.GENESIS_PREV), anchor)
    return span.failure(0) or finish(span.checked, span.end_prev, anchor)


def verify_database(anchor: tuple[int, str] | None = None, *, workers: int | None = None) -> VerifyResult:
    """Verify the whole stored chain. `workers` overrides ROSTER_AUDIT_VERIFY_WORKERS (0: one per CPU);
    a short chain, one CPU or an open transaction verify in this process."""
    plan = verify_parallel.plan(workers)
    if plan is None:
        return verify_sequential(anchor)
    return verify_parallel.verify_in_parallel(plan, anchor)
