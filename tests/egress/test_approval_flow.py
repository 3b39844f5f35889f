"""ask -> approve / refuse / expire through the wait endpoint; abandonment and the grace pass."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_decide
from controlplane.audit.models import AuditRecord
from controlplane.core.roles import APPROVERS
from tests.egress.fixtures import SECRET_VALUE, decide_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def approver(db):
    user = User.objects.create_user("ann", password="pw-123456789")
    user.groups.add(Group.objects.get(name=APPROVERS))
    return user


@pytest.fixture
def ask_grant(make_grant, secret):
    return make_grant(mode="ask", secret=secret, inject_header="authorization",
                      inject_format="Bearer {secret}")


def _ask(gateway, token, **overrides):
    answer = gateway.decide(decide_body(token, **overrides))
    assert answer["verdict"] == "ask", answer
    return answer["approval_id"]


def _wait(gateway, approval_id, timeout=0):
    response = gateway.post(f"/api/gateway/approvals/{approval_id}/wait", {"timeout_seconds": timeout})
    assert response.status_code == 200, response.content
    return response.json()


def test_approved_request_is_allowed_once(gateway, token, ask_grant, approver):
    approval_id = _ask(gateway, token)
    assert _wait(gateway, approval_id) == {"status": "pending", "decision": None, "comment": None}
    approval_decide(approval_id, approver, True, "web")
    answer = _wait(gateway, approval_id)
    assert answer["status"] == "approved"
    decision = answer["decision"]
    assert decision["verdict"] == "allow" and decision["grant"] == "openai-chat"
    assert decision["inject"] == [{"header": "authorization", "value": f"Bearer {SECRET_VALUE}"}]
    assert Approval.objects.get(pk=approval_id).status == "used"
    again = _wait(gateway, approval_id)
    assert again["status"] == "expired" and again["decision"]["reason"] == "approval_expired"
    record = AuditRecord.objects.filter(kind="approval", verdict="approved").get()
    assert '"ann"' in record.body and '"web"' in record.body


def test_refused(gateway, token, ask_grant, approver):
    approval_id = _ask(gateway, token)
    approval_decide(approval_id, approver, False, "cli")
    answer = _wait(gateway, approval_id)
    assert answer["status"] == "refused"
    assert (answer["decision"]["reason"], answer["decision"]["status"]) == ("approval_refused", 403)
    assert AuditRecord.objects.filter(kind="decision", reason="approval_refused").exists()


def test_unanswered_expires(gateway, token, ask_grant):
    approval_id = _ask(gateway, token)
    Approval.objects.filter(pk=approval_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    answer = _wait(gateway, approval_id, timeout=1)
    assert answer["status"] == "expired" and answer["decision"]["reason"] == "approval_expired"
    assert Approval.objects.get(pk=approval_id).status == "expired"


def test_long_poll_sees_a_decision_made_while_waiting(gateway, token, ask_grant, approver, settings):
    settings.ROSTER_APPROVAL_POLL_SECONDS = 0.01
    approval_id = _ask(gateway, token)
    from controlplane.approvals import selectors

    real = selectors.approval_status
    calls = []

    def decide_on_second_poll(pk):
        calls.append(pk)
        if len(calls) == 2:
            approval_decide(approval_id, approver, True, "web")
        return real(pk)

    import controlplane.egress.approval_wait as api

    original = api.approval_status
    api.approval_status = decide_on_second_poll
    try:
        answer = _wait(gateway, approval_id, timeout=5)
    finally:
        api.approval_status = original
    assert answer["status"] == "approved" and len(calls) >= 2


def test_abandoned_then_approved_passes_the_next_identical_request_once(gateway, token, ask_grant, approver):
    approval_id = _ask(gateway, token)
    assert gateway.post(f"/api/gateway/approvals/{approval_id}/abandon", {}).status_code == 200
    approval_decide(approval_id, approver, True, "web")
    first = gateway.decide(decide_body(token))
    assert first["verdict"] == "allow" and first["inject"]
    second = gateway.decide(decide_body(token))
    assert second["verdict"] == "ask"


def test_grace_covers_only_the_identical_request(gateway, token, ask_grant, approver):
    approval_id = _ask(gateway, token)
    gateway.post(f"/api/gateway/approvals/{approval_id}/abandon", {})
    approval_decide(approval_id, approver, True, "web")
    other_body = decide_body(token, body_sha256="a" * 64)
    assert gateway.decide(other_body)["verdict"] == "ask"
    assert gateway.decide(decide_body(token, path="/v1/chat/completions?x=1"))["verdict"] == "ask"
    assert gateway.decide(decide_body(token))["verdict"] == "allow"


def test_grace_ends(gateway, token, ask_grant, approver):
    approval_id = _ask(gateway, token)
    gateway.post(f"/api/gateway/approvals/{approval_id}/abandon", {})
    approval_decide(approval_id, approver, True, "web")
    Approval.objects.filter(pk=approval_id).update(grace_until=timezone.now() - timedelta(seconds=1))
    assert gateway.decide(decide_body(token))["verdict"] == "ask"


def test_approved_without_abandonment_gives_no_grace(gateway, token, ask_grant, approver):
    approval_id = _ask(gateway, token)
    approval_decide(approval_id, approver, True, "web")
    assert gateway.decide(decide_body(token))["verdict"] == "ask"


def test_approval_for_a_since_disabled_grant_denies(gateway, token, ask_grant, approver):
    approval_id = _ask(gateway, token)
    approval_decide(approval_id, approver, True, "web")
    ask_grant.enabled = False
    ask_grant.save()
    answer = _wait(gateway, approval_id)
    assert answer["status"] == "approved" and answer["decision"]["verdict"] == "deny"
    assert answer["decision"]["reason"] == "no_grant" and answer["decision"]["inject"] == []


def test_unknown_and_malformed_approval_ids(gateway):
    missing = "00000000-0000-0000-0000-000000000000"
    assert gateway.post(f"/api/gateway/approvals/{missing}/wait", {"timeout_seconds": 0}).status_code == 404
    assert gateway.post(f"/api/gateway/approvals/{missing}/abandon", {}).status_code == 404
    malformed = gateway.post("/api/gateway/approvals/not-a-uuid/wait", {"timeout_seconds": 0})
    assert malformed.status_code in (404, 422)


@pytest.mark.parametrize("body", [{"timeout_seconds": 10_000}, {"timeout_seconds": -1},
                                  {"timeout_seconds": 1.5}, {"timeout_seconds": "1"}, {},
                                  {"timeout_seconds": 1, "extra": 1}])
def test_wait_rejects_bad_bodies(gateway, token, ask_grant, body):
    approval_id = _ask(gateway, token)
    assert gateway.post(f"/api/gateway/approvals/{approval_id}/wait", body).status_code == 422


def test_grace_is_bound_to_the_grant_that_was_approved(gateway, token, ask_grant, approver, make_grant):
    approval_id = _ask(gateway, token)
    gateway.post(f"/api/gateway/approvals/{approval_id}/abandon", {})
    approval_decide(approval_id, approver, True, "web")
    # A more specific ask grant now decides this request: the old approval does not carry over.
    make_grant(slug="chat-completions", mode="ask", paths=["/v1/chat/completions"])
    answer = gateway.decide(decide_body(token))
    assert answer["verdict"] == "ask" and answer["grant"] == "chat-completions"


def test_database_failure_while_waiting_is_a_deny(gateway, token, ask_grant, monkeypatch):
    approval_id = _ask(gateway, token)
    import controlplane.egress.approval_wait as api

    def broken(_pk):
        raise RuntimeError("database is locked")

    monkeypatch.setattr(api, "approval_status", broken)
    answer = _wait(gateway, approval_id)
    assert answer["status"] == "expired" and answer["decision"]["reason"] == "policy_error"
    assert "locked" not in answer["decision"]["message"]


def test_grace_digest_covers_the_exact_url_though_the_record_is_masked(gateway, token, ask_grant, approver):
    path = "/v1/chat/completions?key=credential-A"
    approval_id = _ask(gateway, token, path=path)
    approval = Approval.objects.get(pk=approval_id)
    assert "credential-A" not in approval.request["url"] and "key=[masked]" in approval.request["url"]
    gateway.post(f"/api/gateway/approvals/{approval_id}/abandon", {})
    approval_decide(approval_id, approver, True, "web")
    other = gateway.decide(decide_body(token, path="/v1/chat/completions?key=credential-B"))
    assert other["verdict"] == "ask"  # same masked URL, different request: not covered
    assert gateway.decide(decide_body(token, path=path))["verdict"] == "allow"


def test_a_waiter_left_behind_after_abandon_does_not_spend_the_approval(gateway, token, ask_grant, approver):
    # The gateway gave up and said so; its last long-poll is still open when the approver clicks.
    approval_id = _ask(gateway, token)
    gateway.post(f"/api/gateway/approvals/{approval_id}/abandon", {})
    approval_decide(approval_id, approver, True, "web")
    stale = _wait(gateway, approval_id)
    assert stale["status"] == "expired" and stale["decision"]["reason"] == "approval_expired"
    assert "retried within the grace" in stale["decision"]["message"]
    assert Approval.objects.get(pk=approval_id).status == "approved"  # not used by nobody
    assert gateway.decide(decide_body(token))["verdict"] == "allow"  # the retry it was kept for
    assert gateway.decide(decide_body(token))["verdict"] == "ask"


def test_a_waiter_past_the_hold_keeps_the_approval_for_the_retry(gateway, token, ask_grant, approver,
                                                                  settings):
    # The hold is over by the control plane's clock and the gateway's abandon has not landed yet.
    approval_id = _ask(gateway, token)
    approval_decide(approval_id, approver, True, "web")
    held_since = timezone.now() - timedelta(seconds=settings.ROSTER_APPROVAL_HOLD_SECONDS + 1)
    Approval.objects.filter(pk=approval_id).update(created_at=held_since)
    stale = _wait(gateway, approval_id)
    assert stale["status"] == "expired" and stale["decision"]["verdict"] == "deny"
    approval = Approval.objects.get(pk=approval_id)
    assert approval.status == "approved" and approval.abandoned_at and approval.grace_until
    assert gateway.decide(decide_body(token))["verdict"] == "allow"
    assert Approval.objects.get(pk=approval_id).status == "used"
