"""The box watcher: one process per box host (`manage.py boxwatcher`) that starts, follows and finishes
every box a queued dispatch created, so no Celery worker process is held for a box's life.

A dispatch (controlplane.dispatch.running.runs_admit) admits a run, creates its box labelled for the
watcher and returns. The watcher hears Docker's `create` event, attaches to the box before starting it
(no output can be missed), marks the run running, and on the box's `die` event finishes the run with the
same outcome and output capture as an inline dispatch; at the deadline it kills the box (the `die` that
follows ends the run as timed out). A box's end frees a slot: `on_slot_free` runs an admission pass.

Events can be missed (the stream drops, the watcher was down), so the watcher also reconciles every live
run of this host against Docker: on start, after the event stream reconnects, and every
ROSTER_BOXWATCHER_RECONCILE_SECONDS. A box it did not attach to (it was started by a watcher that is gone)
is followed from Docker's log, which cannot be proven whole, so its output is flagged truncated, as the
reaper does. Ending a run is conditional (running.run_end), so a run is finished once whoever sees it."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import docker
import requests
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from controlplane.dispatch import box, running
from controlplane.dispatch.engine import WATCHED_LABEL, box_name, docker_client
from controlplane.fleet.models import Run

log = logging.getLogger(__name__)

TICK_SECONDS = 0.5  # how often deadlines are checked and the heartbeat written, at the latest
DOCKER_ERRORS = (docker.errors.DockerException, requests.RequestException)
EXITED = ("exited", "dead")


@dataclass
class Watched:
    run_id: int
    container: object
    collector: box.OutputCollector
    deadline: datetime | None
    timed_out: bool = False


def _run_of(labels) -> int | None:
    try:
        return int(labels["roster.run"])
    except (KeyError, ValueError, TypeError):
        return None


class BoxWatcher:
    def __init__(self, client=None, *, on_slot_free=None, events_client=None):
        self.client = client or docker_client()
        self.events_client = events_client
        self.on_slot_free = on_slot_free or (lambda: None)
        self.boxes: dict[int, Watched] = {}
        self.inbox: queue.Queue = queue.Queue()
        self.stopping = threading.Event()
        self._events_stream = None
        self._last_beat = 0.0
        self.docker_ok = False  # the last reconcile reached Docker: only then is a heartbeat written

    # --- the loop ---

    def run_forever(self) -> None:
        threading.Thread(target=self._events_loop, name="docker-events", daemon=True).start()
        # The control plane's database may not answer yet (a box host starting beside it) or for a while:
        # the watcher keeps trying instead of exiting; what it missed, the next reconcile finds.
        while not self.stopping.is_set() and not self._guarded(self.reconcile):
            self.stopping.wait(TICK_SECONDS)
        next_reconcile = time.monotonic() + settings.ROSTER_BOXWATCHER_RECONCILE_SECONDS
        while not self.stopping.is_set():
            self.heartbeat()
            with contextlib.suppress(queue.Empty):
                self._guarded(self.handle, *self.inbox.get(timeout=TICK_SECONDS))
            close_old_connections()
            self._guarded(self.check_deadlines)
            if time.monotonic() >= next_reconcile and self._guarded(self.reconcile):
                next_reconcile = time.monotonic() + settings.ROSTER_BOXWATCHER_RECONCILE_SECONDS

    @staticmethod
    def _guarded(step, *args) -> bool:
        """One step of the loop; a database that did not answer is logged and the step tried again later
        (its connection dropped, so the next try opens a new one)."""
        try:
            step(*args)
        except DatabaseError as exc:
            log.warning("boxwatcher: the database did not answer (%s); trying again", type(exc).__name__)
            with contextlib.suppress(Exception):
                connection.close()
            return False
        return True

    def stop(self) -> None:
        self.stopping.set()
        if self._events_stream is not None:
            with contextlib.suppress(Exception):
                self._events_stream.close()

    def heartbeat(self) -> None:
        now = time.monotonic()
        if now - self._last_beat < 1.0 or not self.docker_ok:
            return
        self._last_beat = now
        path = settings.ROSTER_BOXWATCHER_HEARTBEAT_FILE
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{time.time():.3f} {len(self.boxes)}\n")

    def _events_loop(self) -> None:
        """Docker's events for this host's watched boxes, into the inbox; reconnects, and asks for a
        reconcile after each reconnect (events may have been missed meanwhile)."""
        filters = {"type": "container", "event": ["create", "die"],
                   "label": [f"roster.namespace={settings.ROSTER_BOX_NAMESPACE}", f"{WATCHED_LABEL}=1"]}
        first = True
        while not self.stopping.is_set():
            try:
                client = self.events_client or docker.from_env()
                self._events_stream = client.events(decode=True, filters=filters)
                if not first:
                    self.inbox.put(("reconcile", None))
                first = False
                for event in self._events_stream:
                    run_id = _run_of((event.get("Actor") or {}).get("Attributes") or {})
                    if run_id is not None:
                        self.inbox.put((event.get("Action") or event.get("status"), run_id))
            except DOCKER_ERRORS as exc:
                log.warning("boxwatcher: docker events stream lost (%s); reconnecting",
                            exc.__class__.__name__)
            if not self.stopping.is_set():
                time.sleep(1.0)

    def handle(self, action: str, run_id: int | None) -> None:
        try:
            if action == "create":
                self.start_created(run_id)
            elif action == "die":
                self.finish(run_id)
            elif action == "reconcile":
                self.reconcile()
        except DOCKER_ERRORS:
            log.exception("boxwatcher: %s of run %s failed; the next reconcile retries", action, run_id)

    # --- one box ---

    def start_created(self, run_id: int) -> None:
        """Start a box a dispatch created: attach, start, mark running, follow."""
        if run_id in self.boxes:
            return
        if not Run.objects.filter(pk=run_id, status=Run.Status.STARTING,
                                  box_host=settings.ROSTER_BOX_NAMESPACE).exists():
            return  # ended meanwhile (cancelled): the reaper removes its box
        try:
            container = self.client.containers.get(box_name(run_id))
        except docker.errors.NotFound:
            return
        if container.status != "created":
            return  # started already, by a watcher now gone: reconcile follows it
        try:
            launched = running.box_launch(run_id, container)
        except Exception as exc:
            log.exception("boxwatcher: run %s could not be started", run_id)
            running.run_end(run_id, Run.Status.FAILED,
                            f"dispatch failed: {exc.__class__.__name__}: {str(exc)[:300]}")
            running.box_done(self.client, run_id, box.BoxOutcome(None, False, False, "", False))
            self.on_slot_free()
            return
        if launched is None:
            self.on_slot_free()
            return
        collector, deadline = launched
        collector.start()
        self.boxes[run_id] = Watched(run_id, container, collector, deadline)
        log.info("boxwatcher: run %s started (%d boxes watched)", run_id, len(self.boxes))

    def follow_unattached(self, run: Run, container) -> None:
        """A box already running that this watcher did not start: follow it from Docker's log."""
        if run.status == Run.Status.STARTING:
            if running.run_mark_running(run.pk, started_at=timezone.now(), deadline=self._deadline(run),
                                        image_id=run.image_id, container_id=container.id) is None:
                box.box_kill(container)
                return
            run.refresh_from_db()
        collector = box.OutputCollector(container, settings.ROSTER_RUN_MAX_OUTPUT_BYTES, follow=True)
        collector.start()
        self.boxes[run.pk] = Watched(run.pk, container, collector, run.deadline)
        log.info("boxwatcher: run %s followed again after a watcher restart", run.pk)

    @staticmethod
    def _deadline(run: Run) -> datetime:
        return timezone.now() + timedelta(seconds=run.timeout_seconds)

    def finish(self, run_id: int) -> None:
        watched = self.boxes.pop(run_id, None)
        if watched is None:
            return
        container = watched.container
        exit_code = None
        with contextlib.suppress(*DOCKER_ERRORS):
            exit_code = container.wait(timeout=settings.ROSTER_BOX_KILL_WAIT_SECONDS)["StatusCode"]
        outcome = box.box_outcome(container, watched.collector, exit_code, timed_out=watched.timed_out)
        running.box_done(self.client, run_id, outcome)
        log.info("boxwatcher: run %s finished (exit %s)", run_id, outcome.exit_code)
        self.on_slot_free()

    def check_deadlines(self) -> None:
        now = timezone.now()
        for watched in list(self.boxes.values()):
            if not watched.timed_out and watched.deadline is not None and now >= watched.deadline:
                watched.timed_out = True
                log.info("boxwatcher: run %s reached its deadline; killing its box", watched.run_id)
                box.box_kill(watched.container)  # its `die` event ends the run as timed out

    # --- reconciling ---

    def reconcile(self) -> dict[str, int]:
        """Every live run of this host against the boxes Docker has. Returns counts, for logs and tests."""
        counts = {"started": 0, "followed": 0, "finished": 0, "failed": 0}
        # The runs first, then the boxes: a box is created before its run reads as running, so a run seen
        # running here whose box is missing from the list taken after really has lost it.
        live = list(Run.objects.filter(status__in=[Run.Status.STARTING, Run.Status.RUNNING],
                                       box_host=settings.ROSTER_BOX_NAMESPACE))
        try:
            containers = self.client.containers.list(
                all=True, filters={"label": f"roster.namespace={settings.ROSTER_BOX_NAMESPACE}"})
        except DOCKER_ERRORS as exc:
            log.warning("boxwatcher: docker engine unavailable (%s); nothing reconciled",
                        exc.__class__.__name__)
            self.docker_ok = False
            return counts
        self.docker_ok = True
        by_run = {_run_of(c.labels or {}): c for c in containers}
        for run in live:
            try:
                done = self._reconcile_one(run, by_run.get(run.pk))
            except DOCKER_ERRORS:
                log.exception("boxwatcher: run %s could not be reconciled this pass", run.pk)
                continue
            if done:
                counts[done] += 1
        self.on_slot_free()  # a lost admission message, a slot freed while nobody watched
        return counts

    @staticmethod
    def _still_running(run_id: int) -> bool:
        """Re-read: an inline dispatch removes its box just before it ends its run."""
        return Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).exists()

    def _reconcile_one(self, run: Run, container) -> str:
        watched = self.boxes.get(run.pk)
        if watched is not None:
            if container is None:
                self.boxes.pop(run.pk).collector.stop()
                running.run_end(run.pk, Run.Status.FAILED, "the box's container is gone")
                return "failed"
            if container.status in EXITED:  # its `die` event was missed
                self.finish(run.pk)
                return "finished"
            return ""
        if container is None:
            if run.status == Run.Status.RUNNING and run.container_id and self._still_running(run.pk):
                running.run_end(run.pk, Run.Status.FAILED, "the box's container is gone")
                return "failed"
            return ""  # still being created by its dispatch (the reaper fails it past the start grace)
        if container.labels.get(WATCHED_LABEL) != "1":
            return ""  # followed by the process that started it (an inline dispatch)
        if container.status == "created":
            self.start_created(run.pk)
            return "started" if run.pk in self.boxes else ""
        self.follow_unattached(run, container)
        if container.status in EXITED and run.pk in self.boxes:
            self.finish(run.pk)
            return "finished"
        return "followed" if run.pk in self.boxes else ""
