"""A dispatcher that fails after its box exists still removes the box and the run's directories, and the
run says why; a command that cannot run is a failed run, not a stuck one."""

from __future__ import annotations

import docker
import pytest

from controlplane.dispatch import box, running
from controlplane.dispatch.engine import box_name
from controlplane.dispatch.rundirs import run_dirs_path
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, worker_create

pytestmark = [pytest.mark.integration, pytest.mark.docker]


def test_failure_after_the_box_started_cleans_up(stack, docker_client, monkeypatch):
    seen = {}

    def broken_watch(container, deadline, **kwargs):
        seen["container"] = container.id
        seen["dirs"] = run_dirs_path(run.pk).exists()
        raise RuntimeError("watcher blew up")

    monkeypatch.setattr(box, "box_watch", broken_watch)
    run, _ = run_create(worker_create("doomed-worker"), command=["sleep", "30"], timeout_seconds=60)
    running.run_dispatch(run.pk)
    run.refresh_from_db()
    assert seen["container"] and seen["dirs"]  # the box really existed
    assert run.status == Run.Status.FAILED
    assert run.status_reason == "dispatch failed: RuntimeError: watcher blew up"
    assert run.token_hash is None
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(box_name(run.pk))
    assert not run_dirs_path(run.pk).exists()


def test_command_not_found_is_a_failed_run(stack, docker_client):
    run, _ = run_create(worker_create("typo-worker"), command=["definitely-not-installed"])
    running.run_dispatch(run.pk)
    run.refresh_from_db()
    assert (run.status, run.exit_code) == (Run.Status.FAILED, 127)
    assert "command not found: definitely-not-installed" in run.output
