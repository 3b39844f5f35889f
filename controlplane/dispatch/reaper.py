"""Reconciling runs with the boxes that exist, for after a Celery worker died mid-run (its watcher died with
it) or a box vanished. Live runs past their deadline are killed and ended; a running run whose box is gone
fails; a box that exited unwatched is finalised from what Docker kept; boxes of ended runs are removed.
Only boxes labelled with this box host's namespace are touched, and only live runs this host claimed (or
that no host has claimed yet) are judged: with several box hosts, another host's boxes are not ours to see."""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime, timedelta

import docker
import requests
from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from controlplane.dispatch import box
from controlplane.dispatch.engine import docker_client
from controlplane.dispatch.rundirs import run_dirs_remove
from controlplane.dispatch.running import run_end, run_finish
from controlplane.fleet.models import Run

log = logging.getLogger(__name__)


def _finished_at(container) -> datetime | None:
    value = (container.attrs.get("State") or {}).get("FinishedAt") or ""
    if not value or value.startswith("0001"):  # Docker's zero time: never finished
        return None
    # Docker gives up to nanoseconds ("…:05.123456789Z"); Python parses at most microseconds.
    whole, _, fraction = value.rstrip("Z").partition(".")
    return parse_datetime(f"{whole}.{fraction[:6] or '0'}+00:00")


def _reap_live(client, run: Run, container, now: datetime) -> str:
    grace = timedelta(seconds=settings.ROSTER_REAP_EXITED_GRACE_SECONDS)
    if run.status == Run.Status.STARTING:
        if run.deadline and now > run.deadline:
            if container is not None:
                box.box_kill(container)
            run_end(run.pk, Run.Status.FAILED, "the box did not start in time (dispatcher lost)")
            return "failed"
        return ""
    if container is None:
        run_end(run.pk, Run.Status.FAILED, "the box's container is gone")
        return "failed"
    if run.deadline and now > run.deadline + grace:
        # The watcher should have done this at the deadline; it is gone, so kill and collect here.
        box.box_kill(container)
        outcome = box.box_watch(container, now, follow=False)
        run_finish(run.pk, box.BoxOutcome(outcome.exit_code, True, False, outcome.output, outcome.truncated,
                                          outcome.sources))
        return "timed_out"
    finished = _finished_at(container)
    if container.status == "exited" and finished and now > finished + grace:
        run_finish(run.pk, box.box_watch(container, now + grace, follow=False))
        return "finalised"
    return ""


def runs_reap() -> dict[str, int]:
    """One reconciliation pass. Returns counts of what it did, for logs and tests."""
    counts = {"failed": 0, "timed_out": 0, "finalised": 0, "removed": 0}
    try:
        client = docker_client()
        containers = client.containers.list(
            all=True, filters={"label": f"roster.namespace={settings.ROSTER_BOX_NAMESPACE}"}
        )
    except (docker.errors.DockerException, requests.RequestException) as exc:
        log.warning("reaper: docker engine unavailable (%s); nothing reconciled", exc.__class__.__name__)
        return counts
    by_run: dict[int, object] = {}
    for container in containers:
        with contextlib.suppress(KeyError, ValueError):
            by_run[int(container.labels["roster.run"])] = container
    now = timezone.now()
    live = Run.objects.filter(status__in=[Run.Status.STARTING, Run.Status.RUNNING],
                              box_host__in=("", settings.ROSTER_BOX_NAMESPACE))
    live_ids = set()
    for run in live:
        live_ids.add(run.pk)
        try:
            done = _reap_live(client, run, by_run.get(run.pk), now)
        except (docker.errors.DockerException, requests.RequestException):
            log.exception("reaper: run %s could not be reconciled this pass", run.pk)
            continue
        if done:
            counts[done] += 1
            live_ids.discard(run.pk)
    for run_id, container in by_run.items():
        if run_id in live_ids:
            continue
        with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
            container.remove(force=True)
            counts["removed"] += 1
        run_dirs_remove(run_id)
    counts["failed"] += _fail_abandoned_elsewhere(now)
    return counts


def _fail_abandoned_elsewhere(now: datetime) -> int:
    """Live runs of another box host long past their deadline: that host stopped reconciling (gone, or its
    worker down), so nothing else would ever end them. Ending revokes the run's token at every gateway;
    the box itself is removed by its own host's reaper when that host is back (boxes of ended runs)."""
    cutoff = now - timedelta(seconds=settings.ROSTER_REAP_OTHER_HOST_GRACE_SECONDS)
    abandoned = (Run.objects.filter(status__in=[Run.Status.STARTING, Run.Status.RUNNING], deadline__lt=cutoff)
                 .exclude(box_host__in=("", settings.ROSTER_BOX_NAMESPACE)))
    ended = 0
    for run in abandoned:
        if run_end(run.pk, Run.Status.FAILED, f"box host {run.box_host} stopped reconciling its runs"):
            ended += 1
    return ended


def stale_queued_runs() -> list[int]:
    """Queued runs whose dispatch message looks lost; dispatching them again is safe (idempotent)."""
    cutoff = timezone.now() - timedelta(seconds=settings.ROSTER_RUN_REQUEUE_SECONDS)
    stale = Run.objects.filter(status=Run.Status.QUEUED, created_at__lt=cutoff)
    return list(stale.values_list("pk", flat=True))
