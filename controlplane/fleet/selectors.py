"""Reads for workers and runs."""

from __future__ import annotations

from django.db.models import QuerySet

from controlplane.fleet.models import Run, Worker


def worker_list(*, active_only: bool = False) -> QuerySet[Worker]:
    workers = Worker.objects.all()
    return workers.filter(active=True) if active_only else workers


def worker_get(name: str) -> Worker:
    return Worker.objects.get(name=name)


def run_list(*, worker: Worker | None = None, status: str | None = None, limit: int = 100) -> QuerySet[Run]:
    runs = Run.objects.select_related("worker", "filed_by")
    if worker is not None:
        runs = runs.filter(worker=worker)
    if status:
        runs = runs.filter(status=status)
    return runs.order_by("-id")[:limit]


def run_get(run_id: int) -> Run:
    return Run.objects.select_related("worker").get(pk=run_id)
