"""Celery tasks of the run lifecycle: thin wrappers that take ids and call the worker side
(controlplane.dispatch.running) and the reaper. The dispatch task is safe to deliver twice (acks_late
means a worker lost mid-task gets its message redelivered)."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_ready

from controlplane.dispatch import reaper, running

log = logging.getLogger(__name__)


@shared_task(acks_late=True, ignore_result=True)
def dispatch_run(run_id: int) -> None:
    running.run_dispatch(int(run_id))


@shared_task(ignore_result=True)
def reap_runs() -> dict[str, int]:
    counts = reaper.runs_reap()
    for run_id in reaper.stale_queued_runs():
        dispatch_run.delay(run_id)
    return counts


@worker_ready.connect
def reconcile_on_start(sender=None, **kwargs) -> None:
    """A worker that (re)starts reconciles at once instead of waiting for the first beat."""
    log.info("worker ready: reconciling runs")
    reap_runs.delay()
