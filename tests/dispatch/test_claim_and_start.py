"""The claim (queued -> starting exactly once, with a fresh token) and run_start's budget gate:
proactive runs over a cap are refused; human-filed runs always go ahead (budgets gate proactive runs
only)."""

from __future__ import annotations

import pytest

from controlplane.audit.models import AuditRecord
from controlplane.dispatch import running, starting
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_resolve_token, run_set_status
from controlplane.fleet.tokens import token_hash
from controlplane.ledger.models import Cap


@pytest.fixture
def enqueued(monkeypatch):
    from controlplane.dispatch import tasks

    sent: list[int] = []
    monkeypatch.setattr(tasks.dispatch_run, "delay", lambda run_id: sent.append(run_id))
    return sent


def _states(run) -> list[str]:
    return [r.body for r in AuditRecord.objects.filter(kind="run_state", run_id_ref=run.pk).order_by("seq")]


def test_claim_happens_once_and_mints_a_fresh_token(worker, settings):
    settings.ROSTER_BOX_NAMESPACE = "this-box-host"
    run, created_token = run_create(worker, command=["true"])
    claimed = running.run_claim(run.pk)
    assert claimed is not None
    claimed_run, box_token = claimed
    assert claimed_run.status == Run.Status.STARTING
    assert box_token != created_token and claimed_run.token_hash == token_hash(box_token)
    assert run_resolve_token(created_token) is None  # the token that existed before dispatch is dead
    assert run_resolve_token(box_token).pk == run.pk
    assert claimed_run.deadline is not None  # the reaper fails it if no box runs by then
    assert claimed_run.box_host == "this-box-host"  # whose reaper judges it
    assert running.run_claim(run.pk) is None  # a second delivery gets nothing
    assert sum('"to":"starting"' in body for body in _states(run)) == 1


def test_claim_of_an_ended_run_does_nothing(worker):
    run, _ = run_create(worker, command=["true"])
    run_set_status(run.pk, Run.Status.CANCELLED, "changed my mind")
    assert running.run_claim(run.pk) is None
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.token_hash is None


def test_dispatch_of_a_claimed_run_starts_nothing(worker, monkeypatch):
    run, _ = run_create(worker, command=["true"])
    running.run_claim(run.pk)
    monkeypatch.setattr(running, "docker_client", lambda: pytest.fail("a second delivery touched Docker"))
    running.run_dispatch(run.pk)
    assert Run.objects.get(pk=run.pk).status == Run.Status.STARTING


def test_human_run_starts_even_over_budget(worker, enqueued, django_capture_on_commit_callbacks):
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=0)
    with django_capture_on_commit_callbacks(execute=True):
        run = starting.run_start(worker, ["echo", "hi"], proactive=False, timeout=30)
    assert run.status == Run.Status.QUEUED and run.origin == Run.Origin.HUMAN
    assert run.timeout_seconds == 30 and run.command == ["echo", "hi"]
    assert enqueued == [run.pk]


def test_proactive_run_over_a_cap_is_refused(worker, enqueued, django_capture_on_commit_callbacks):
    Cap.objects.create(worker=None, unit="micro", window="month", limit=0)
    with django_capture_on_commit_callbacks(execute=True):
        run = starting.run_start(worker, ["echo", "hi"], proactive=True)
    assert run.status == Run.Status.REFUSED and run.origin == Run.Origin.PROACTIVE
    assert run.status_reason == "over budget: org micro/month 0/0"
    assert run.token_hash is None
    assert enqueued == []


def test_proactive_run_under_its_caps_starts(worker, enqueued, django_capture_on_commit_callbacks):
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=5)
    with django_capture_on_commit_callbacks(execute=True):
        run = starting.run_start(worker, ["echo", "hi"], proactive=True)
    assert run.status == Run.Status.QUEUED and enqueued == [run.pk]


def test_proactive_run_refused_at_dispatch_when_a_cap_filled_meanwhile(worker, monkeypatch):
    run, _ = run_create(worker, origin=Run.Origin.PROACTIVE, command=["true"])
    Cap.objects.create(worker=worker, unit="bytes", window="all", limit=0)
    monkeypatch.setattr(running, "docker_client", lambda: pytest.fail("an over-budget run touched Docker"))
    running.run_dispatch(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.REFUSED and run.status_reason.startswith("over budget: worker:alpha")


def test_dispatch_refused_when_docker_is_unreachable(worker, monkeypatch):
    import docker

    def broken():
        raise docker.errors.DockerException("no engine")

    monkeypatch.setattr(running, "docker_client", broken)
    run, _ = run_create(worker, command=["true"])
    running.run_dispatch(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.REFUSED
    assert run.status_reason == "docker engine unavailable: DockerException"


def test_broker_down_leaves_the_run_queued_for_the_reaper(worker, monkeypatch,
                                                          django_capture_on_commit_callbacks):
    from controlplane.dispatch import tasks

    def down(run_id):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(tasks.dispatch_run, "delay", down)
    with django_capture_on_commit_callbacks(execute=True):
        run = starting.run_start(worker, ["echo", "hi"])
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
