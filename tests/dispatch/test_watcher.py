"""The box watcher (controlplane.dispatch.watcher) against a fake engine: it starts a created box after
attaching, finishes its run on `die` with the same outcome as an inline dispatch, kills at the deadline,
and on (re)start reconciles every live run of this host: nothing lost, nothing finished twice. The real
engine, 20 boxes at once and a watcher killed mid-run are in tests/integration/boxes/test_watcher_boxes.py."""

from __future__ import annotations

import io
import struct
import types
from datetime import timedelta

import docker
import pytest
from django.utils import timezone

from controlplane.audit.models import AuditRecord
from controlplane.dispatch.engine import WATCHED_LABEL, box_name
from controlplane.dispatch.watcher import BoxWatcher
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status

NS = "rstwatch"


class FakeBox:
    def __init__(self, run_id, *, status="created", output=b"", exit_code=0, watched=True):
        self.id = f"c{run_id}"
        self.name = f"{NS}-run-{run_id}"
        self.labels = {"roster.namespace": NS, "roster.run": str(run_id)}
        if watched:
            self.labels[WATCHED_LABEL] = "1"
        self.status, self.output, self.exit_code = status, output, exit_code
        self.attached = self.started = self.killed = self.removed = False
        # On the locked network, where dispatch reads its address (the run's token works from there only).
        self.attrs = {"State": {"Status": status, "OOMKilled": False, "ExitCode": exit_code},
                      "HostConfig": {"NetworkMode": "roster-boxes"},
                      "NetworkSettings": {"Networks": {"roster-boxes": {"IPAddress": f"10.89.0.{run_id}"}}}}

    def attach(self, **kwargs):
        self.attached = True
        # Docker's attach with demux: each frame as (stdout, stderr).
        return iter([(self.output, None)] if kwargs.get("demux") else [self.output])

    @property
    def client(self):
        """What the collector reads a box's log through when it did not attach (Docker's multiplexed /logs
        frames: an 8-byte header, stream 1 for stdout, the length)."""
        frames = struct.pack(">BxxxL", 1, len(self.output)) + self.output if self.output else b""
        response = types.SimpleNamespace(raw=io.BytesIO(frames), close=lambda: None)
        api = types.SimpleNamespace(_url=lambda path, *args: path, _raise_for_status=lambda r: None,
                                    _get=lambda *args, **kwargs: response)
        return types.SimpleNamespace(api=api)

    def logs(self, **_):
        return iter([self.output])

    def start(self):
        assert self.attached, "started before anything listened to its output"
        self.started, self.status = True, "running"

    def exit(self, code=None):
        self.status = "exited"
        self.attrs["State"].update(Status="exited", ExitCode=self.exit_code if code is None else code)

    def wait(self, timeout=None):
        return {"StatusCode": self.attrs["State"]["ExitCode"]}

    def kill(self):
        self.killed = True
        self.exit(137)

    def reload(self):
        pass

    def remove(self, force=False):
        self.removed = True
        engine.boxes.pop(self.name, None)


class FakeEngine:
    def __init__(self):
        self.boxes: dict[str, FakeBox] = {}
        self.containers = self

    def add(self, box):
        self.boxes[box.name] = box
        return box

    def list(self, all=False, filters=None):  # noqa: A002 - the SDK's name
        key, value = filters["label"].split("=", 1)
        return [b for b in self.boxes.values() if b.labels.get(key) == value]

    def get(self, name):
        try:
            return self.boxes[name]
        except KeyError:
            raise docker.errors.NotFound(name) from None


engine = FakeEngine()


@pytest.fixture
def watcher(settings, tmp_path):
    settings.ROSTER_BOX_NAMESPACE = NS
    settings.ROSTER_BOX_RUNS_DIR = tmp_path / "runs"
    settings.ROSTER_BOX_KILL_WAIT_SECONDS = 1
    engine.boxes.clear()
    freed = []
    w = BoxWatcher(engine, on_slot_free=lambda: freed.append(1))
    w.freed = freed
    return w


def _run(worker, status=Run.Status.STARTING, timeout=60, **fields):
    run, _ = run_create(worker, command=["true"], timeout_seconds=timeout)
    Run.objects.filter(pk=run.pk).update(status=status, box_host=NS, **fields)
    return Run.objects.get(pk=run.pk)


def _ended_records(run_id):
    bodies = AuditRecord.objects.filter(kind="run_state", run_id_ref=run_id).values_list("body", flat=True)
    return [b for b in bodies if '"to":"succeeded"' in b or '"to":"failed"' in b or '"to":"timed_out"' in b]


def test_create_then_die_runs_the_box_and_finishes_its_run_once(worker, watcher):
    run = _run(worker)
    box = engine.add(FakeBox(run.pk, output=b"hello\n"))
    watcher.handle("create", run.pk)
    assert box.started and Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
    assert run.pk in watcher.boxes
    box.exit(0)
    watcher.handle("die", run.pk)
    watcher.handle("die", run.pk)  # a repeated event
    watcher.reconcile()  # and a reconcile after it: still one end
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.output, run.output_truncated, run.exit_code) == ("succeeded", "hello\n", False, 0)
    assert run.token_hash is None and box.removed and not watcher.boxes
    assert len(_ended_records(run.pk)) == 1
    assert watcher.freed  # its slot was offered to the queue


def test_a_failing_box_fails_its_run_with_the_exit_code(worker, watcher):
    run = _run(worker)
    box = engine.add(FakeBox(run.pk, output=b"partial\n", exit_code=3))
    watcher.handle("create", run.pk)
    box.exit()
    watcher.handle("die", run.pk)
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.status_reason, run.output) == ("failed", "exit code 3", "partial\n")


def test_the_deadline_kills_the_box_and_the_run_times_out(worker, watcher):
    run = _run(worker, timeout=1)
    box = engine.add(FakeBox(run.pk, output=b"started\n"))
    watcher.handle("create", run.pk)
    watcher.boxes[run.pk].deadline = timezone.now() - timedelta(seconds=1)
    watcher.check_deadlines()
    assert box.killed
    watcher.handle("die", run.pk)
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.status_reason) == ("timed_out", "killed at the run's deadline")


def test_a_run_cancelled_before_its_box_starts_is_not_started(worker, watcher):
    run = _run(worker)
    box = engine.add(FakeBox(run.pk))
    run_set_status(run.pk, Run.Status.CANCELLED, "cancelled")
    watcher.handle("create", run.pk)
    assert not box.started and not watcher.boxes


def test_restart_reconciles_every_live_run(worker, watcher):
    """A fresh watcher: boxes a dead watcher started keep running or have exited meanwhile."""
    past = timezone.now() + timedelta(seconds=60)
    still_running = _run(worker, status=Run.Status.RUNNING, deadline=past, container_id="c1")
    exited = _run(worker, status=Run.Status.RUNNING, deadline=past, container_id="c2")
    vanished = _run(worker, status=Run.Status.RUNNING, deadline=past, container_id="c3")
    never_started = _run(worker)
    still_creating = _run(worker)  # its dispatch has not created the box yet
    inline = _run(worker, status=Run.Status.RUNNING, deadline=past, container_id="c6")
    engine.add(FakeBox(still_running.pk, status="running", output=b"so far\n"))
    engine.add(FakeBox(exited.pk, status="exited", output=b"done unwatched\n")).exit(0)
    fresh = engine.add(FakeBox(never_started.pk))
    other = engine.add(FakeBox(inline.pk, status="running", watched=False))
    counts = watcher.reconcile()
    assert counts == {"started": 1, "followed": 1, "finished": 1, "failed": 1}
    got = {r.pk: r for r in Run.objects.all()}
    assert got[exited.pk].status == "succeeded" and got[exited.pk].output == "done unwatched\n"
    assert got[exited.pk].output_truncated is True  # read back from Docker's log: not provably whole
    assert got[vanished.pk].status_reason == "the box's container is gone"
    assert got[vanished.pk].status == "failed"
    assert got[never_started.pk].status == "running" and fresh.started
    assert got[still_running.pk].status == "running" and still_running.pk in watcher.boxes
    assert got[still_creating.pk].status == "starting"
    assert got[inline.pk].status == "running" and inline.pk not in watcher.boxes and not other.removed
    engine.get(box_name(still_running.pk)).exit(0)
    watcher.reconcile()  # its `die` was missed too: the reconcile finishes it
    assert Run.objects.get(pk=still_running.pk).status == "succeeded"
    assert len(_ended_records(still_running.pk)) == 1


def test_a_box_removed_under_the_watcher_fails_its_run(worker, watcher):
    run = _run(worker)
    engine.add(FakeBox(run.pk))
    watcher.handle("create", run.pk)
    engine.boxes.clear()
    watcher.reconcile()
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.status_reason) == ("failed", "the box's container is gone")
    assert not watcher.boxes


def test_an_engine_that_is_down_changes_nothing(worker, watcher):
    run = _run(worker, status=Run.Status.RUNNING, container_id="c1")

    class Down:
        containers = None

        def __getattr__(self, name):
            raise docker.errors.DockerException("engine down")

    watcher.client = Down()
    watcher.client.containers = watcher.client
    assert watcher.reconcile() == {"started": 0, "followed": 0, "finished": 0, "failed": 0}
    assert Run.objects.get(pk=run.pk).status == "running"


def test_other_hosts_runs_are_not_judged(worker, watcher):
    run = _run(worker, status=Run.Status.RUNNING, container_id="c1")
    Run.objects.filter(pk=run.pk).update(box_host="elsewhere")
    watcher.reconcile()
    assert Run.objects.get(pk=run.pk).status == "running"


def test_a_database_that_does_not_answer_yet_is_waited_for_not_fatal(watcher, monkeypatch):
    """A box host starting beside the control plane: the first reconciles fail; the watcher keeps trying
    (it used to exit, and that host's boxes were never started)."""
    from django.db import OperationalError

    tries = []

    def reconcile():
        tries.append(1)
        if len(tries) < 3:
            raise OperationalError("server closed the connection unexpectedly")
        watcher.stopping.set()  # answered: the loop would go on; the test stops it here

    monkeypatch.setattr(watcher, "reconcile", reconcile)
    monkeypatch.setattr(watcher, "_events_loop", lambda: None)
    monkeypatch.setattr("controlplane.dispatch.watcher.TICK_SECONDS", 0.01)
    watcher.run_forever()
    assert len(tries) == 3
