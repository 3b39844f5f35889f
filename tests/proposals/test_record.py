"""The one way a proposal's change is recorded (services.record): its audit record in the change's
transaction, then, only after the commit, the queue pages told and, only when a change approved it, the
executor started; a rolled-back change does neither; an unknown event is refused."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import transaction

from controlplane.approvals import broadcast
from controlplane.audit.models import AuditRecord
from controlplane.proposals import services, tasks
from controlplane.proposals.models import Proposal
from controlplane.proposals.services import executing
from controlplane.proposals.services.record import record

pytestmark = pytest.mark.django_db
HOOK = {"kind": "webhook", "destination": "hooks", "payload": {"text": "deployed"}}


@pytest.fixture
def seen(monkeypatch):
    """What went out after commits: queue announcements and executor starts, in order."""
    events: list[tuple] = []
    monkeypatch.setattr(broadcast, "approval_changed", lambda pk, status: events.append(("told", status)))
    monkeypatch.setattr(tasks.execute_proposal, "apply_async",
                        lambda args=None, kwargs=None, **_: events.append(("started", args[0])))
    return events


@pytest.fixture
def pending(gw, token, make_destination, seen, django_capture_on_commit_callbacks):
    make_destination("hooks", kind="webhook", url="http://127.0.0.1:9/hook", method="POST")
    with django_capture_on_commit_callbacks(execute=True):
        status, body = gw.propose(token, HOOK)
    assert status == 201 and body["status"] == "pending"
    return Proposal.objects.select_related("worker").get(pk=body["id"])


def _audit(proposal) -> list[tuple[str, str]]:
    rows = [(json.loads(r.body)["data"], r.verdict) for r in AuditRecord.objects.filter(kind="proposal")]
    return [(d["event"], verdict) for d, verdict in rows if d.get("proposal") == str(proposal.pk)]


def test_intake_tells_the_queue_and_starts_nothing(pending, seen):
    assert seen == [("told", "pending")]
    assert _audit(pending) == [("proposed", "ask")]


def test_an_approval_starts_the_executor_after_the_commit(pending, seen, approver,
                                                         django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.proposal_decide(pending.pk, approver, True, "web")
        assert seen == [("told", "pending")]  # nothing went out before the commit
    assert seen[1:] == [("told", "approved"), ("started", str(pending.pk))]
    assert _audit(pending)[-1] == ("decided", "approved")


def test_a_refusal_starts_nothing(pending, seen, approver, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.proposal_decide(pending.pk, approver, False, "cli", reason="not now")
    assert seen[1:] == [("told", "refused")]
    assert _audit(pending)[-1] == ("decided", "refused")


def test_an_expiry_starts_nothing(pending, seen, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        assert services.proposal_expire_due(pending.expires_at + timedelta(seconds=1)) == 1
    assert seen[1:] == [("told", "expired")]
    assert _audit(pending)[-1] == ("expired", "expired")


def test_a_failed_attempt_retried_later_does_not_start_a_second_executor(pending, seen, approver,
                                                                       django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.proposal_decide(pending.pk, approver, True, "web")
        claimed = executing.proposal_claim(pending.pk)
        executing.proposal_attempt_failed(claimed, {"summary": "503"}, final=False)
    assert [e for e in seen if e[0] == "started"] == [("started", str(pending.pk))]
    assert Proposal.objects.get(pk=pending.pk).status == "approved"
    assert [event for event, _ in _audit(pending)] == ["proposed", "decided", "executing", "attempt_failed"]


def test_a_retry_starts_the_executor_again(pending, seen, approver, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.proposal_decide(pending.pk, approver, True, "web")
        claimed = executing.proposal_claim(pending.pk)
        executing.proposal_attempt_failed(claimed, {"summary": "refused"}, final=True)
        services.proposal_retry(pending.pk, approver)
    assert [e for e in seen if e[0] == "started"] == [("started", str(pending.pk))] * 2
    assert _audit(pending)[-2:] == [("failed", "failed"), ("retry", "approved")]


def test_a_rolled_back_change_tells_nobody_and_leaves_no_record(pending, seen, approver,
                                                               django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError):
        with transaction.atomic():
            services.proposal_decide(pending.pk, approver, True, "web")
            raise RuntimeError("the caller's next step failed")
    assert seen == [("told", "pending")]
    assert Proposal.objects.get(pk=pending.pk).status == "pending"
    assert _audit(pending) == [("proposed", "ask")]


def test_an_unknown_event_is_refused_and_records_nothing(pending, seen):
    before = AuditRecord.objects.count()
    with pytest.raises(ValueError, match="unknown proposal event"):
        record(pending, "approved-by-magic")
    assert AuditRecord.objects.count() == before
