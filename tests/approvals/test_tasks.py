"""The approvals' Celery task is thin: Celery beat calls it by name, and it expires what is due."""

from __future__ import annotations

from django.conf import settings

from controlplane.approvals import tasks


def test_expire_approvals_calls_the_approvals_service(monkeypatch):
    monkeypatch.setattr(tasks, "approval_expire_due", lambda now=None: 3)
    assert tasks.expire_approvals() == 3


def test_beat_schedules_the_task_by_its_name():
    assert tasks.expire_approvals.name == "controlplane.approvals.tasks.expire_approvals"
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert tasks.expire_approvals.name in scheduled
    assert "controlplane.dispatch.tasks.reap_runs" in scheduled


def test_the_celery_app_discovers_it():
    from controlplane.celery import app

    app.loader.import_default_modules()
    assert "controlplane.approvals.tasks.expire_approvals" in app.tasks
