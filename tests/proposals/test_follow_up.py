"""Follow-up task proposals (work the worker proposes: direction and pace, invariant 6): validated like any
proposal, held for a person unless a follow-up rule allows it, then queued as a proactive run (budget-gated,
invariant 8) by dispatch's executor, registered into the proposals registry; the proposal records who was
in the room."""

from __future__ import annotations

import pytest

from controlplane.fleet.models import Run
from controlplane.fleet.services import run_fix_input
from controlplane.ledger.models import Cap
from controlplane.proposals.executors import EXECUTORS
from controlplane.proposals.models import Proposal, TrustRule
from controlplane.proposals.services import proposal_decide

FOLLOW_UP = {
    "kind": "follow_up",
    "payload": {"task": "Check the deploy again in the morning."},
    "reason": "Ana asked for a second look",
}


@pytest.fixture(autouse=True)
def no_dispatch(monkeypatch):
    monkeypatch.setattr("controlplane.dispatch.tasks.dispatch_run.delay", lambda run_id: None)


def test_dispatch_registered_the_executor():
    assert EXECUTORS["follow_up"].__module__ == "controlplane.relay.followups"


def test_a_follow_up_waits_for_a_person_then_queues_a_proactive_run(
    gw, token, live_run, approver, django_capture_on_commit_callbacks
):
    run, _ = live_run
    people = [{"id": "@ana:x", "name": "Ana", "role": "member"}]
    run_fix_input(run.pk, carries_conversation=True, participants=people, input_sha256="0" * 64)
    status, body = gw.propose(token, FOLLOW_UP)
    assert status == 201 and body["status"] == "pending" and body["destination"] is None
    proposal = Proposal.objects.get(pk=body["id"])
    assert proposal.participants == people and not Run.objects.filter(origin="proactive").exists()
    with django_capture_on_commit_callbacks(execute=True):
        proposal_decide(proposal.pk, approver, True, "web")
    proposal.refresh_from_db()
    queued = Run.objects.get(origin="proactive")
    assert (
        proposal.status == "executed" and proposal.result["summary"] == f"run {queued.pk} queued (proactive)"
    )
    assert queued.task == FOLLOW_UP["payload"]["task"] and queued.status == Run.Status.QUEUED
    assert queued.command[:3] == ["python3", "-m", "workers.agent"]


def test_a_follow_up_rule_allows_it_and_a_cap_still_gates_it(
    gw, token, worker, django_capture_on_commit_callbacks
):
    TrustRule.objects.create(
        name="follow-ups", worker=worker, destination=None, kind="follow_up", max_per_day=1
    )
    Cap.objects.create(worker=None, unit="requests", window="day", limit=0)
    with django_capture_on_commit_callbacks(execute=True):
        status, body = gw.propose(token, FOLLOW_UP)
    assert status == 201 and body.get("approved_by_rule") is True
    proposal = Proposal.objects.get(pk=body["id"])
    refused = Run.objects.get(origin="proactive")
    assert refused.status == Run.Status.REFUSED and "over budget" in refused.status_reason
    assert proposal.status == "failed" and proposal.result["summary"] == f"run {refused.pk} refused"


def test_a_destination_rule_never_allows_a_follow_up(gw, token, worker, make_destination):
    hook = make_destination("chat", kind="webhook", url="https://hooks.example.org/x")
    TrustRule.objects.create(name="chat-any", worker=worker, destination=hook, kind="", max_per_day=10)
    status, body = gw.propose(token, FOLLOW_UP)
    assert status == 201 and body["status"] == "pending"


@pytest.mark.parametrize("payload", [{}, {"task": ""}, {"task": "x" * 4001}, {"task": "t", "when": "now"}])
def test_a_bad_follow_up_is_refused_and_nothing_is_recorded(gw, token, payload):
    status, body = gw.propose(token, {"kind": "follow_up", "payload": payload})
    assert status == 422 and body["error"] == "invalid_proposal"
    assert not Proposal.objects.exists()
