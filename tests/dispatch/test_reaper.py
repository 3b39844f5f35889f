"""The reaper against a fake engine (the real crash-and-restart is in
tests/integration/boxes/test_dispatch_queue.py): every live run ends up matching the boxes that exist."""

from __future__ import annotations

import io
import struct
from datetime import timedelta
from types import SimpleNamespace

import docker
import pytest
from django.utils import timezone

from controlplane.dispatch import reaper
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status


class _FakeLogApi:
    """docker-py's low-level calls boxoutput.demuxed_log makes: the box's log as stdout frames."""

    def __init__(self, output):
        self.output = output

    def _url(self, path, *args):
        return path

    def _get(self, url, **_):
        return SimpleNamespace(raw=io.BytesIO(struct.pack(">BxxxL", 1, len(self.output)) + self.output),
                               close=lambda: None)

    def _raise_for_status(self, response):
        pass


class FakeContainer:
    def __init__(self, run_id, namespace, *, status="running", exit_code=0, output=b"", finished_ago=60):
        self.labels = {"roster.namespace": namespace, "roster.run": str(run_id)}
        self.status = status
        self.exit_code = exit_code
        self.output = output
        finished = (timezone.now() - timedelta(seconds=finished_ago)).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
        self.attrs = {"State": {"FinishedAt": finished if status == "exited" else "0001-01-01T00:00:00Z",
                                "OOMKilled": False}}
        self.killed = self.removed = False
        self.id = f"box-{run_id}"

    @property
    def client(self):
        return SimpleNamespace(api=_FakeLogApi(self.output))

    def wait(self, timeout=None):
        return {"StatusCode": 137 if self.killed else self.exit_code}

    def kill(self):
        self.killed = True
        self.status = "exited"

    def reload(self):
        pass

    def remove(self, force=False):
        self.removed = True


class FakeEngine:
    def __init__(self, containers):
        self.all = containers
        self.containers = self

    def list(self, all=False, filters=None):  # noqa: A002 - the SDK's name
        key, value = filters["label"].split("=", 1)
        return [c for c in self.all if c.labels.get(key) == value]

    def get(self, name):
        raise docker.errors.NotFound(name)


@pytest.fixture
def engine(monkeypatch, settings):
    settings.ROSTER_BOX_NAMESPACE = "rsttest"
    settings.ROSTER_REAP_EXITED_GRACE_SECONDS = 5

    def install(*containers):
        fake = FakeEngine(list(containers))
        monkeypatch.setattr(reaper, "docker_client", lambda: fake)
        return fake

    return install


def _live(worker, status, *, deadline_in=300):
    run, _ = run_create(worker, command=["true"])
    deadline = timezone.now() + timedelta(seconds=deadline_in)
    Run.objects.filter(pk=run.pk).update(status=status, deadline=deadline)
    return run


def test_running_run_whose_box_is_gone_fails(worker, engine):
    run = _live(worker, Run.Status.RUNNING)
    engine()
    assert reaper.runs_reap()["failed"] == 1
    run.refresh_from_db()
    assert (run.status, run.status_reason) == (Run.Status.FAILED, "the box's container is gone")
    assert run.token_hash is None


def test_box_that_exited_unwatched_is_finalised(worker, engine):
    run = _live(worker, Run.Status.RUNNING)
    engine(FakeContainer(run.pk, "rsttest", status="exited", exit_code=0, output=b"done\n"))
    assert reaper.runs_reap()["finalised"] == 1
    run.refresh_from_db()
    assert (run.status, run.output, run.exit_code) == (Run.Status.SUCCEEDED, "done\n", 0)


def test_box_that_just_exited_is_left_to_its_watcher(worker, engine):
    run = _live(worker, Run.Status.RUNNING)
    engine(FakeContainer(run.pk, "rsttest", status="exited", finished_ago=1))
    assert reaper.runs_reap() == {"failed": 0, "timed_out": 0, "finalised": 0, "removed": 0}
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING


def test_box_past_its_deadline_is_killed(worker, engine):
    run = _live(worker, Run.Status.RUNNING, deadline_in=-60)
    box = FakeContainer(run.pk, "rsttest", output=b"working\n")
    engine(box)
    assert reaper.runs_reap()["timed_out"] == 1
    run.refresh_from_db()
    assert box.killed and run.status == Run.Status.TIMED_OUT and run.output == "working\n"


def test_starting_run_whose_dispatcher_vanished_fails_after_grace(worker, engine):
    stuck = _live(worker, Run.Status.STARTING, deadline_in=-1)
    fresh = _live(worker, Run.Status.STARTING, deadline_in=60)
    engine()
    assert reaper.runs_reap()["failed"] == 1
    assert Run.objects.get(pk=stuck.pk).status == Run.Status.FAILED
    assert Run.objects.get(pk=fresh.pk).status == Run.Status.STARTING


def test_boxes_of_ended_or_unknown_runs_are_removed_and_others_untouched(worker, engine):
    ended, _ = run_create(worker, command=["true"])
    run_set_status(ended.pk, Run.Status.CANCELLED, "x")
    leftover = FakeContainer(ended.pk, "rsttest", status="exited")
    stranger = FakeContainer(987654, "rsttest")
    foreign = FakeContainer(ended.pk, "someone-elses-namespace")
    engine(leftover, stranger, foreign)
    assert reaper.runs_reap()["removed"] == 2
    assert leftover.removed and stranger.removed and not foreign.removed


def test_runs_of_another_box_host_are_left_to_that_host(worker, engine):
    """Two box hosts: this host's engine has no box for the other host's live runs, which is no sign
    that they are gone; its own runs are still judged."""
    theirs = _live(worker, Run.Status.RUNNING)
    starting = _live(worker, Run.Status.STARTING, deadline_in=-1)
    ours = _live(worker, Run.Status.RUNNING)
    Run.objects.filter(pk__in=[theirs.pk, starting.pk]).update(box_host="other-host")
    Run.objects.filter(pk=ours.pk).update(box_host="rsttest")
    engine()
    assert reaper.runs_reap()["failed"] == 1
    assert Run.objects.get(pk=ours.pk).status == Run.Status.FAILED
    assert Run.objects.get(pk=theirs.pk).status == Run.Status.RUNNING
    assert Run.objects.get(pk=starting.pk).status == Run.Status.STARTING


def test_runs_of_a_box_host_that_stopped_reconciling_are_failed_long_after_their_deadline(
        worker, engine, settings):
    settings.ROSTER_REAP_OTHER_HOST_GRACE_SECONDS = 60
    abandoned = _live(worker, Run.Status.RUNNING, deadline_in=-120)
    recent = _live(worker, Run.Status.RUNNING, deadline_in=-30)  # its own host may still collect it
    Run.objects.filter(pk__in=[abandoned.pk, recent.pk]).update(box_host="gone-host")
    engine()
    assert reaper.runs_reap()["failed"] == 1
    abandoned.refresh_from_db()
    assert abandoned.status == Run.Status.FAILED and abandoned.token_hash is None
    assert abandoned.status_reason == "box host gone-host stopped reconciling its runs"
    assert Run.objects.get(pk=recent.pk).status == Run.Status.RUNNING


def test_engine_down_changes_nothing(worker, monkeypatch):
    run = _live(worker, Run.Status.RUNNING)

    def down():
        raise docker.errors.DockerException("down")

    monkeypatch.setattr(reaper, "docker_client", down)
    assert reaper.runs_reap() == {"failed": 0, "timed_out": 0, "finalised": 0, "removed": 0}
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING


def test_stale_queued_runs_are_offered_again(worker, settings):
    settings.ROSTER_RUN_REQUEUE_SECONDS = 60
    old, _ = run_create(worker, command=["true"])
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    run_create(worker, command=["true"])
    assert reaper.stale_queued_runs() == [old.pk]


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-11-30T10:12:01.123456789Z", "2026-11-30 10:12:01.123456+00:00"),
    ("2026-11-30T10:12:01Z", "2026-11-30 10:12:01+00:00"),
    ("2026-11-30T10:12:01.5Z", "2026-11-30 10:12:01.500000+00:00"),
    ("0001-01-01T00:00:00Z", None),
    ("", None),
])
def test_finish_times_as_docker_writes_them(value, expected):
    parsed = reaper._finished_at(SimpleNamespace(attrs={"State": {"FinishedAt": value}}))
    assert (str(parsed) if parsed else None) == expected
