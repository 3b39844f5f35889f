"""Faults injected into verification workers (imported by the workers themselves, so module level)."""

from controlplane.audit import verify_worker

REAL_SCAN_TASK = verify_worker.scan_task


def crash_on_third_range(index, lo, hi, anchor):
    if index == 2:
        raise RuntimeError("worker died")
    return REAL_SCAN_TASK(index, lo, hi, anchor)
