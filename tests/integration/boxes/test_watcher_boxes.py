"""Dispatch not bound to Celery slots, on the real engine: with the Celery worker's two processes, 20
boxes sleep at once and a 21st run still starts and finishes; the box watcher killed (SIGKILL) and
started again while boxes run still finishes every run, each exactly once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from controlplane.audit.models import AuditRecord
from controlplane.dispatch.cancelling import run_cancel
from controlplane.dispatch.engine import box_name
from controlplane.dispatch.starting import run_start
from controlplane.fleet.models import Run
from controlplane.fleet.services import worker_create
from tests.integration.boxes.conftest import wait_for_run

pytestmark = [pytest.mark.integration, pytest.mark.docker]

ENDED = set(Run.Status.values) - set(Run.LIVE_STATUSES)
SLEEPERS = 20


def _ends(run_id: int) -> list[str]:
    bodies = AuditRecord.objects.filter(kind="run_state", run_id_ref=run_id).values_list("body", flat=True)
    return [b for b in bodies if any(f'"to":"{s}"' in b for s in ENDED)]


def _watcher_idle(watchers, timeout: float = 60) -> None:
    """Until the watcher follows no box (its heartbeat says how many): a cancelled run is ended at once, but
    its box's end is the watcher's to finish, and the next test's runs may reuse the ids."""
    heartbeat = watchers.tmp / "boxwatcher.heartbeat"
    deadline = time.monotonic() + timeout
    while True:
        stamp, _, count = heartbeat.read_text().strip().partition(" ")
        if count == "0" and float(stamp) > time.time() - 2:
            return
        assert time.monotonic() < deadline, f"the watcher still follows {count} boxes"
        time.sleep(0.2)


def _wait_all(run_ids, statuses, timeout: float):
    deadline = time.monotonic() + timeout
    for run_id in run_ids:
        wait_for_run(run_id, statuses, timeout=max(1.0, deadline - time.monotonic()))


def test_twenty_sleeping_boxes_do_not_stop_a_21st_run(queued_stack, celery_workers, box_watchers, capsys):
    worker = worker_create("sleepy-worker")
    begun = time.monotonic()
    sleepers = [run_start(worker, ["sleep", "300"], timeout=600).pk for _ in range(SLEEPERS)]
    _wait_all(sleepers, {Run.Status.RUNNING}, timeout=180)
    all_up = time.monotonic() - begun
    assert Run.objects.filter(pk__in=sleepers, status=Run.Status.RUNNING).count() == SLEEPERS
    started = time.monotonic()
    quick = run_start(worker, ["sh", "-c", "echo twenty-first"], timeout=60)
    quick = wait_for_run(quick.pk, ENDED, timeout=60)
    took = time.monotonic() - started
    assert quick.status == Run.Status.SUCCEEDED, (quick.status_reason, celery_workers.log()[-2000:])
    assert quick.output == "twenty-first\n"
    # Still sleeping, all of them: no Celery process was needed to keep them.
    assert Run.objects.filter(pk__in=sleepers, status=Run.Status.RUNNING).count() == SLEEPERS
    with capsys.disabled():
        print(f"\n[dispatch] {SLEEPERS} boxes running {all_up:.1f}s after queueing; the 21st run queued to "
              f"succeeded in {took:.2f}s")
    for run_id in sleepers:
        run_cancel(run_id, by="the test")
    _wait_all(sleepers, ENDED, timeout=60)
    _watcher_idle(box_watchers)
    assert all(len(_ends(run_id)) == 1 for run_id in sleepers)
    assert all(Run.objects.get(pk=run_id).status == Run.Status.CANCELLED for run_id in sleepers)


def test_a_watcher_killed_and_restarted_finishes_every_run_once(queued_stack, box_watchers, docker_client):
    worker = worker_create("restart-worker")
    # The worker's code directory is mounted live (read-only) into its boxes: a file the test writes there
    # tells the boxes when to go on, so what happens while the watcher is down does not hang on timing.
    code = Path(queued_stack.site.settings["ROSTER_BOX_CODE_DIR"]) / worker.name
    code.mkdir(parents=True, exist_ok=True)

    def after(signal: str, then: str) -> list[str]:
        return ["sh", "-c", f"until [ -e /code/{signal} ]; do sleep 0.1; done; {then}"]

    short = [run_start(worker, after("short", f"echo short-{i}"), timeout=120).pk for i in range(3)]
    long = [run_start(worker, after("long", f"echo long-{i}"), timeout=120).pk for i in range(3)]
    timed = run_start(worker, ["sh", "-c", "echo before; sleep 300"], timeout=20).pk
    _wait_all([*short, *long, timed], {Run.Status.RUNNING}, timeout=90)
    box_watchers.kill()  # SIGKILL: its attachments die; the boxes run on
    queued_while_down = run_start(worker, ["sh", "-c", "echo admitted while nobody watched"], timeout=120)
    wait_for_run(queued_while_down.pk, {Run.Status.STARTING}, timeout=30)  # created, waiting to be started
    (code / "short").write_text("go\n")  # the short ones exit while nobody watches
    for run_id in short:
        docker_client.containers.get(box_name(run_id)).wait(timeout=30)
    assert Run.objects.filter(pk__in=short, status=Run.Status.RUNNING).count() == 3  # nobody noticed
    box_watchers.start()  # reconciles every live run at once
    time.sleep(1)
    (code / "long").write_text("go\n")  # the long ones exit while the new watcher follows them
    everything = [*short, *long, timed, queued_while_down.pk]
    _wait_all(everything, ENDED, timeout=90)
    runs = {run.pk: run for run in Run.objects.filter(pk__in=everything)}
    for i, run_id in enumerate(short):
        assert (runs[run_id].status, runs[run_id].output) == (Run.Status.SUCCEEDED, f"short-{i}\n"), \
            (runs[run_id].status_reason, box_watchers.log()[-4000:])
    for i, run_id in enumerate(long):  # followed again from Docker's log, to their end
        assert (runs[run_id].status, runs[run_id].output) == (Run.Status.SUCCEEDED, f"long-{i}\n")
    assert (runs[timed].status, runs[timed].output) == (Run.Status.TIMED_OUT, "before\n"), \
        (runs[timed].status_reason, box_watchers.log()[-3000:])
    assert runs[queued_while_down.pk].status == Run.Status.SUCCEEDED
    assert runs[queued_while_down.pk].output == "admitted while nobody watched\n"
    assert runs[queued_while_down.pk].output_truncated is False  # attached before it started
    assert all(len(_ends(run_id)) == 1 for run_id in everything), {r: _ends(r) for r in everything}
    assert all(run.token_hash is None for run in runs.values())
    _watcher_idle(box_watchers)
