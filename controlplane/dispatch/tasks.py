"""Celery tasks of the run lifecycle: thin wrappers that take ids and call the worker side
(controlplane.dispatch.running) and the reaper. A dispatch is an admission pass: it creates the boxes of
the oldest queued runs that fit under this host's box limit and returns at once; the box watcher
(controlplane.dispatch.watcher) starts and follows them, so no worker process is held for a box's life.
Safe to deliver twice (acks_late means a worker lost mid-task gets its message redelivered)."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_ready

from controlplane.dispatch import reaper, running

log = logging.getLogger(__name__)


@shared_task(acks_late=True, ignore_result=True)
def dispatch_run(run_id: int) -> list[int]:
    """`run_id` is the run that was queued; admission takes the oldest queued runs first (FIFO), which is
    this one unless others wait ahead of it."""
    return running.runs_admit()


@shared_task(acks_late=True, ignore_result=True)
def admit_runs() -> list[int]:
    """A slot may be free (the watcher saw a box end): admit what fits."""
    return running.runs_admit()


@shared_task(ignore_result=True)
def reap_runs() -> dict[str, int]:
    counts = reaper.runs_reap()
    if reaper.stale_queued_runs():
        admit_runs.delay()
    return counts


@worker_ready.connect
def reconcile_on_start(sender=None, **kwargs) -> None:
    """A worker that (re)starts reconciles at once instead of waiting for the first beat."""
    log.info("worker ready: reconciling runs")
    reap_runs.delay()
