"""A box that floods its output and exits at once keeps the first ROSTER_RUN_MAX_OUTPUT_BYTES of it, and the
run says it was truncated; a box that prints less keeps all of it, unflagged. Repeated, because losing the
start of the output was a race between the box's exit and the capture attaching (Docker's on-disk log,
capped, had already dropped it): a box must not be able to erase what it printed first."""

from __future__ import annotations

import pytest

from controlplane.dispatch import running
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, worker_create

pytestmark = [pytest.mark.integration, pytest.mark.docker]

REPEATS = 10
# Numbered lines, so that any loss or reordering shows; the first line is the one a box would erase.
FLOOD = ("import sys\n"
         "out = sys.stdout.buffer\n"
         "out.write(b'FIRST LINE\\n')\n"
         "out.write(b''.join(b'%07d ' % i + b'x' * 55 + b'\\n' for i in range({lines})))\n"
         "out.flush()\n")


def _expected(lines: int) -> bytes:
    return b"FIRST LINE\n" + b"".join(b"%07d " % i + b"x" * 55 + b"\n" for i in range(lines))


def _run(worker, lines: int) -> Run:
    run, _ = run_create(worker, command=["python3", "-c", FLOOD.format(lines=lines)], timeout_seconds=60)
    running.run_dispatch(run.pk)
    run.refresh_from_db()
    return run


def test_a_flood_that_exits_at_once_keeps_its_first_bytes_and_says_so(stack, settings):
    limit = settings.ROSTER_RUN_MAX_OUTPUT_BYTES
    lines = (640 * 1024) // 64  # 640 KiB: more than Docker keeps on disk for a box (2 x the limit)
    assert len(_expected(lines)) > 2 * limit
    worker = worker_create("flood-worker")
    for attempt in range(REPEATS):
        run = _run(worker, lines)
        assert run.status == Run.Status.SUCCEEDED, (attempt, run.status_reason)
        first = _expected(lines)[:limit]
        assert run.output.encode() == first, f"attempt {attempt}: not the first {limit} bytes"
        assert run.output_truncated is True, f"attempt {attempt}"


def test_output_under_the_limit_is_kept_whole_and_not_flagged(stack, settings):
    limit = settings.ROSTER_RUN_MAX_OUTPUT_BYTES
    lines = (limit - 64) // 64
    worker = worker_create("quick-worker")
    for attempt in range(2):
        run = _run(worker, lines)
        got, want = run.output.encode(), _expected(lines)
        assert got == want, f"attempt {attempt}: {len(got)} of {len(want)} bytes"
        assert run.output_truncated is False, f"attempt {attempt}"
