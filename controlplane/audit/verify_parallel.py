"""Verify a long audit chain on several CPUs, with exactly the sequential verifier's result.

Every record stores its predecessor's hash, so a seq range can be checked on its own: a worker process
seeds the walk from the range's first record (its seq and stored prev_hash) and streams the range.
This process then walks the ranges in seq order, holding the true chain state (expected seq, hash of
the last good record, records checked). A range whose worker found nothing wrong AND whose seed equals
that state (the seam: its first record follows the previous range's last) is taken as it is; any other
range (a problem, a seam mismatch, a crashed or stopped worker) is verified again here, in one pass,
from the true state. So the first bad seq, the message, the count and the head are the ones the
sequential walk gives: it would make the same decisions over the ranges taken as they are, and does
make them over the rest.

Workers come from a fork server (verify_worker says why) and open their own connections. Inside a
transaction the workers could not see what this connection sees, so verification stays in this process
there."""

from __future__ import annotations

import math
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from controlplane.audit import chain, verify_worker
from controlplane.audit.chain import VerifyResult, finish
from controlplane.audit.models import AuditRecord
from controlplane.audit.verify_scan import scan_range

# More ranges than workers, so one slow worker (a busy core) does not hold up the end.
RANGES_PER_WORKER = 4
_NO_FAILURE = 2**62


@dataclass(frozen=True)
class Plan:
    workers: int
    ranges: list[tuple[int | None, int | None]]  # [lo, hi) seq bounds; None is open


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def plan(workers: int | None = None) -> Plan | None:
    """The seq ranges to verify in parallel, or None to verify in this process."""
    if connection.in_atomic_block or multiprocessing.current_process().daemon:
        return None  # workers could not see this transaction's rows / a daemon may not have children
    wanted = settings.ROSTER_AUDIT_VERIFY_WORKERS if workers is None else workers
    count = usable_cpus() if wanted == 0 else wanted
    if count <= 1:
        return None
    table = connection.ops.quote_name(AuditRecord._meta.db_table)
    with connection.cursor() as cursor:  # raw values: the ORM would convert (and choke on) them
        cursor.execute(f"SELECT MIN(seq), MAX(seq), COUNT(*) - COUNT(seq) FROM {table}")
        lo, hi, nulls = cursor.fetchone()
    if type(lo) is not int or type(hi) is not int or nulls:
        # An empty chain, or one whose seq column was tampered with (SQLite keeps any type in it; a
        # NULL falls outside every range): the single pass sees every row in the order it reads them.
        return None
    if hi - lo + 1 < settings.ROSTER_AUDIT_VERIFY_PARALLEL_MIN_RECORDS:
        return None
    size = max(math.ceil((hi - lo + 1) / (count * RANGES_PER_WORKER)), settings.ROSTER_AUDIT_CHUNK_SIZE)
    cuts = list(range(lo + size, hi + 1, size))
    # The first and last ranges are open, so every record is in exactly one range, whatever its seq.
    return Plan(count, list(zip([None, *cuts], [*cuts, None], strict=True)))


def _combine(ranges, futures, anchor) -> VerifyResult:
    expected, prev, total = 1, chain.GENESIS_PREV, 0
    for (lo, hi), future in zip(ranges, futures, strict=True):
        try:
            span = future.result()
        except Exception:  # noqa: BLE001 - a crashed worker's range is verified here instead
            span = None
        if span is not None and span.problem is None and not span.stopped and (
                span.checked == 0 or (span.start_seq, span.start_prev) == (expected, prev)):
            if span.checked:
                expected, prev, total = span.end_seq, span.end_prev, total + span.checked
            continue
        span = scan_range(lo, hi, (expected, prev), anchor)
        failed = span.failure(total)
        if failed is not None:
            return failed
        expected, prev, total = span.end_seq, span.end_prev, total + span.checked
    return finish(total, prev, anchor)


def verify_in_parallel(work: Plan, anchor: tuple[int, str] | None = None) -> VerifyResult:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([verify_worker.__name__])  # Django loads once, in the fork server
    first_failed = context.Value("q", _NO_FAILURE)
    initargs = (first_failed, connection.settings_dict, settings.ROSTER_AUDIT_CHUNK_SIZE)
    with ProcessPoolExecutor(max_workers=work.workers, mp_context=context, initializer=verify_worker.init,
                             initargs=initargs) as pool:
        futures = [pool.submit(verify_worker.scan_task, i, lo, hi, anchor)
                   for i, (lo, hi) in enumerate(work.ranges)]
        try:
            return _combine(work.ranges, futures, anchor)
        finally:
            first_failed.value = -1  # whatever still runs stops at its next fetch
            for future in futures:
                future.cancel()
