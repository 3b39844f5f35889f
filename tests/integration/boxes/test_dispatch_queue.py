"""Runs dispatched through real Redis and a real Celery worker into real boxes: the command line end to end,
the deadline kill, a dispatch delivered twice, and reconciliation after the worker is killed mid-run."""

from __future__ import annotations

import io
import time

import docker
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from controlplane.audit.models import AuditRecord
from controlplane.dispatch.engine import box_name
from controlplane.dispatch.starting import run_start
from controlplane.dispatch.tasks import dispatch_run
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, worker_create
from tests.integration.boxes.conftest import wait_for_run

pytestmark = [pytest.mark.integration, pytest.mark.docker]

ENDED = set(Run.Status.values) - set(Run.LIVE_STATUSES)


def _cli(*args) -> str:
    out = io.StringIO()
    call_command("run", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _gone(client, run_id) -> bool:
    try:
        client.containers.get(box_name(run_id))
    except docker.errors.NotFound:
        return True
    return False


def _removed_soon(client, run_id, timeout: float = 20) -> bool:
    """The run ends first, then its box goes (a watcher killed in between must lose no outcome)."""
    deadline = time.monotonic() + timeout
    while not _gone(client, run_id):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_run_start_wait_logs_from_the_command_line(queued_stack, docker_client):
    worker_create("cli-worker")
    command = ["sh", "-c", 'echo "hello from $ROSTER_WORKER"']
    started = _cli("start", "cli-worker", "--timeout", "60", "--", *command)
    run_id = int(started.split()[1].rstrip(":"))
    assert "queued" in started
    assert "succeeded" in _cli("wait", str(run_id), "--timeout", "60")
    assert _cli("logs", str(run_id)) == "hello from cli-worker\n"
    assert f"{run_id}\tcli-worker\thuman\tsucceeded" in _cli("list")
    run = Run.objects.get(pk=run_id)
    assert run.exit_code == 0 and run.image_id.startswith("sha256:") and run.token_hash is None
    assert _removed_soon(docker_client, run_id)
    with pytest.raises(CommandError, match="already ended"):
        _cli("cancel", str(run_id))


def test_failed_command_is_recorded_with_its_exit_code(queued_stack):
    worker = worker_create("failing-worker")
    run = run_start(worker, ["sh", "-c", "echo partial; exit 3"], timeout=60)
    run = wait_for_run(run.pk, ENDED)
    assert (run.status, run.exit_code, run.status_reason) == (Run.Status.FAILED, 3, "exit code 3")
    assert run.output == "partial\n"
    with pytest.raises(CommandError, match="did not succeed"):
        _cli("wait", str(run.pk))


def test_box_is_killed_at_its_deadline(queued_stack, docker_client):
    worker = worker_create("slow-worker")
    begun = time.monotonic()
    run = run_start(worker, ["sh", "-c", "echo started; sleep 60"], timeout=2)
    run = wait_for_run(run.pk, ENDED, timeout=40)
    assert run.status == Run.Status.TIMED_OUT, run.status_reason
    assert time.monotonic() - begun < 30
    assert run.output == "started\n"
    assert run.token_hash is None
    assert _removed_soon(docker_client, run.pk)


def test_output_is_bounded(queued_stack, settings):
    worker = worker_create("chatty-worker")
    limit = settings.ROSTER_RUN_MAX_OUTPUT_BYTES
    run = run_start(worker, ["python3", "-c", f"print('x' * {limit * 3})"], timeout=60)
    run = wait_for_run(run.pk, ENDED)
    assert run.status == Run.Status.SUCCEEDED
    assert run.output_truncated is True and len(run.output.encode()) == limit


def test_dispatch_delivered_twice_starts_one_box(queued_stack):
    worker = worker_create("twice-worker")
    run, _ = run_create(worker, command=["sh", "-c", "echo once; sleep 1"], timeout_seconds=60)
    dispatch_run.delay(run.pk)
    dispatch_run.delay(run.pk)  # the redelivery, racing the first on the worker's second process
    run = wait_for_run(run.pk, ENDED)
    assert run.status == Run.Status.SUCCEEDED and run.output == "once\n"
    states = [r.body for r in AuditRecord.objects.filter(kind="run_state", run_id_ref=run.pk).order_by("seq")]
    assert sum('"to":"starting"' in body for body in states) == 1
    assert sum('"to":"running"' in body for body in states) == 1
    dispatch_run.delay(run.pk)  # a late third delivery changes nothing
    time.sleep(1)
    assert Run.objects.get(pk=run.pk).status == Run.Status.SUCCEEDED


def test_runs_reconciled_after_the_worker_and_the_watcher_are_killed(queued_stack, celery_workers,
                                                                    box_watchers, docker_client):
    worker = worker_create("crash-worker")
    vanished = run_start(worker, ["sleep", "300"], timeout=600)
    finished = run_start(worker, ["sh", "-c", "sleep 2; echo finished unwatched"], timeout=600)
    wait_for_run(vanished.pk, {Run.Status.RUNNING})
    wait_for_run(finished.pk, {Run.Status.RUNNING})
    celery_workers.kill()  # SIGKILL, both: the host's processes crash, the boxes do not
    box_watchers.kill()
    docker_client.containers.get(box_name(vanished.pk)).remove(force=True)
    docker_client.containers.get(box_name(finished.pk)).wait(timeout=30)
    assert Run.objects.get(pk=vanished.pk).status == Run.Status.RUNNING  # nobody noticed yet
    celery_workers.start()  # each reconciles on start
    box_watchers.start()
    vanished = wait_for_run(vanished.pk, ENDED, timeout=40)
    finished = wait_for_run(finished.pk, ENDED, timeout=40)
    assert (vanished.status, vanished.status_reason) == (Run.Status.FAILED, "the box's container is gone")
    assert finished.status == Run.Status.SUCCEEDED and finished.output == "finished unwatched\n"
    assert vanished.token_hash is None and finished.token_hash is None
    deadline = time.monotonic() + 20
    while not _gone(docker_client, finished.pk):
        assert time.monotonic() < deadline, "the reaper left an ended run's box behind"
        time.sleep(0.2)


def test_cancel_kills_a_running_box(queued_stack, docker_client):
    worker = worker_create("cancelled-worker")
    run = run_start(worker, ["sh", "-c", "echo before; sleep 60"], timeout=120)
    wait_for_run(run.pk, {Run.Status.RUNNING})
    time.sleep(0.3)  # let it print
    assert "cancelled" in _cli("cancel", str(run.pk))
    run = Run.objects.get(pk=run.pk)
    assert run.status == Run.Status.CANCELLED and run.token_hash is None
    deadline = time.monotonic() + 20
    while not _gone(docker_client, run.pk):
        assert time.monotonic() < deadline, "the cancelled run's box is still there"
        time.sleep(0.1)
    deadline = time.monotonic() + 10
    while Run.objects.get(pk=run.pk).output != "before\n":  # the watcher keeps what it printed
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED
