"""The run lifecycle's Celery tasks are thin: they call the worker side and the reaper with ids (the
real queue is in tests/integration/boxes)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from controlplane.dispatch import reaper, tasks
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create


def test_reap_runs_reconciles_and_offers_lost_dispatches_again(worker, monkeypatch, settings):
    settings.ROSTER_RUN_REQUEUE_SECONDS = 60
    lost, _ = run_create(worker, command=["true"])
    Run.objects.filter(pk=lost.pk).update(created_at=timezone.now() - timedelta(minutes=10))
    run_create(worker, command=["true"])  # just queued: its message is still on its way
    sent: list[str] = []
    monkeypatch.setattr(tasks.admit_runs, "delay", lambda: sent.append("admit"))
    monkeypatch.setattr(reaper, "runs_reap", lambda: {"failed": 0})
    assert tasks.reap_runs() == {"failed": 0}
    assert sent == ["admit"]  # one admission pass, which takes the oldest queued runs first


def test_reap_runs_sends_nothing_when_no_dispatch_looks_lost(worker, monkeypatch, settings):
    settings.ROSTER_RUN_REQUEUE_SECONDS = 60
    run_create(worker, command=["true"])
    sent: list[str] = []
    monkeypatch.setattr(tasks.admit_runs, "delay", lambda: sent.append("admit"))
    monkeypatch.setattr(reaper, "runs_reap", lambda: {"failed": 0})
    tasks.reap_runs()
    assert sent == []


def test_dispatch_task_is_acked_late():
    assert tasks.dispatch_run.acks_late is True
    assert tasks.dispatch_run.name == "controlplane.dispatch.tasks.dispatch_run"
    assert tasks.reap_runs.name == "controlplane.dispatch.tasks.reap_runs"
    assert tasks.admit_runs.acks_late is True
