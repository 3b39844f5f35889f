"""Start and cancel from the Run admin: Admins can, Auditors cannot; bad input changes nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from controlplane.core.roles import ADMINS, AUDITORS
from controlplane.dispatch import tasks
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_resolve_token

CHANGELIST = "admin:fleet_run_changelist"


@pytest.fixture
def enqueued(monkeypatch):
    sent: list[int] = []
    monkeypatch.setattr(tasks.dispatch_run, "delay", lambda run_id: sent.append(run_id))
    return sent


def _member(client, group) -> User:
    user = User.objects.create_user(f"{group.lower()}-person", password="x" * 12, is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    client.force_login(user)
    return user


def test_admin_starts_a_run_from_the_form(client, worker, enqueued, django_capture_on_commit_callbacks):
    user = _member(client, ADMINS)
    url = reverse("admin:fleet_run_start")
    assert client.get(url).status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(url, {"worker": worker.pk, "command": "python3 -m agent --task 'tidy up'",
                                   "timeout": "90"})
    run = Run.objects.get()
    assert answer.status_code == 302 and answer.url == reverse("admin:fleet_run_change", args=[run.pk])
    assert run.command == ["python3", "-m", "agent", "--task", "tidy up"] and run.timeout_seconds == 90
    assert run.filed_by == user and run.origin == Run.Origin.HUMAN and enqueued == [run.pk]


@pytest.mark.parametrize("command", ["", "   ", "unbalanced 'quote"])
def test_bad_command_is_shown_and_nothing_starts(client, worker, enqueued, command):
    _member(client, ADMINS)
    answer = client.post(reverse("admin:fleet_run_start"), {"worker": worker.pk, "command": command})
    assert answer.status_code == 200 and answer.context["form"].errors
    assert not Run.objects.exists() and enqueued == []


def test_admin_cancels_and_restarts_runs(client, worker, enqueued, django_capture_on_commit_callbacks):
    _member(client, ADMINS)
    run, token = run_create(worker, command=["echo", "hi"], timeout_seconds=33)
    answer = client.post(reverse(CHANGELIST), {"action": "cancel_runs", "_selected_action": [run.pk]})
    assert answer.status_code == 302
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.status_reason == "cancelled by admins-person"
    assert run_resolve_token(token) is None
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse(CHANGELIST), {"action": "start_again", "_selected_action": [run.pk]})
    again = Run.objects.exclude(pk=run.pk).get()
    assert again.command == ["echo", "hi"] and again.timeout_seconds == 33 and enqueued == [again.pk]


def test_auditors_can_neither_start_nor_cancel(client, worker, enqueued):
    _member(client, AUDITORS)
    run, _ = run_create(worker, command=["true"])
    assert client.get(reverse("admin:fleet_run_start")).status_code == 403
    page = client.get(reverse(CHANGELIST))
    assert page.status_code == 200 and b"cancel_runs" not in page.content
    client.post(reverse(CHANGELIST), {"action": "cancel_runs", "_selected_action": [run.pk]})
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
    assert enqueued == []
