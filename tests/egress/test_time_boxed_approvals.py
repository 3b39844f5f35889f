"""Issue 27.8: time-boxed approvals. An approver who approves a held request may also allow identical
requests (same worker, same grant, same request digest: method, exact URL, body digest, bound headers)
for N minutes. Recorded as the approver's decision with its scope and expiry; an identical request in the
window is allowed without a card and its allow record names the approval; anything else asks again."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.approvals.services import (
    ApprovalClosed,
    ApprovalWindowInvalid,
    approval_decide,
    approval_window_revoke,
    window_choices,
)
from controlplane.audit.models import AuditRecord
from controlplane.core.roles import APPROVERS
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status
from tests.egress.fixtures import DECIDE, decide_body

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


def _live(worker, address):
    run, raw = run_create(worker)
    run_set_status(run.pk, Run.Status.RUNNING)
    Run.objects.filter(pk=run.pk).update(box_address=address)
    return run, raw


def _boxed(gateway, token, approver, minutes=10, **overrides) -> str:
    """Ask, approve with a time box, and let the held request collect its approval."""
    answer = gateway.decide(decide_body(token, **overrides))
    assert answer["verdict"] == "ask", answer
    approval_decide(answer["approval_id"], approver, True, "web", window_minutes=minutes)
    waited = gateway.post(f"/api/gateway/approvals/{answer['approval_id']}/wait", {"timeout_seconds": 0})
    assert waited.json()["decision"]["verdict"] == "allow"
    return answer["approval_id"]


def _last_decision() -> dict:
    return json.loads(AuditRecord.objects.filter(kind="decision").order_by("-seq").first().body)["data"]


def test_identical_requests_pass_in_the_window_naming_the_approval(gateway, token, ask_grant, approver):
    approval_id = _boxed(gateway, token, approver)
    opened = Approval.objects.count()
    for _ in range(3):
        again = gateway.decide(decide_body(token))
        assert again["verdict"] == "allow" and again["inject"], again
        assert f"time-boxed approval {approval_id}" in again["message"] and "by ann" in again["message"]
        record = _last_decision()
        assert record["approval"] == approval_id and record["approval_window_until"]
    assert Approval.objects.count() == opened  # no new card
    decided = [json.loads(r.body)["data"] for r in AuditRecord.objects.filter(kind="approval")]
    window = next(d for d in decided if d.get("event") == "decided")["window"]
    assert window["minutes"] == 10 and window["scope"]["worker"] == "alpha"
    assert window["scope"]["grant"] == "openai-chat" and len(window["scope"]["request_digest"]) == 64
    until = Approval.objects.get(pk=approval_id).window_until
    assert timedelta(minutes=9) < until - timezone.now() <= timedelta(minutes=10)


def test_another_run_of_the_same_worker_is_covered(gateway, token, ask_grant, approver, worker):
    _boxed(gateway, token, approver)
    _run, other_token = _live(worker, "10.89.0.3")
    assert gateway.decide(decide_body(other_token, client="10.89.0.3"))["verdict"] == "allow"


@pytest.mark.parametrize("change", [
    {"path": "/v1/chat/completions?x=1"},  # other URL
    {"method": "PUT"},  # other method
    {"body_sha256": "a" * 64},  # other body
    {"headers": [["content-type", "text/plain"]]},  # another value of a bound header
    {"headers": [["content-type", "application/json"], ["x-extra", "1"]]},  # one bound header more
])
def test_anything_not_identical_asks_again(gateway, token, ask_grant, approver, change):
    _boxed(gateway, token, approver)
    answer = gateway.decide(decide_body(token, **change))
    assert answer["verdict"] == "ask" and answer["approval_id"]


def test_another_worker_asks_again(gateway, token, ask_grant, approver, other_worker):
    _boxed(gateway, token, approver)
    _run, beta_token = _live(other_worker, "10.89.0.4")
    assert gateway.decide(decide_body(beta_token, client="10.89.0.4"))["verdict"] == "ask"


def test_after_the_window_it_asks_again(gateway, token, ask_grant, approver):
    approval_id = _boxed(gateway, token, approver)
    Approval.objects.filter(pk=approval_id).update(window_until=timezone.now() - timedelta(seconds=1))
    assert gateway.decide(decide_body(token))["verdict"] == "ask"


def test_revoked_asks_again_and_is_audited(gateway, token, ask_grant, approver):
    approval_id = _boxed(gateway, token, approver)
    approval_window_revoke(approval_id, approver)
    record = json.loads(AuditRecord.objects.filter(kind="approval").order_by("-seq").first().body)["data"]
    assert record["event"] == "window_revoked" and record["by"] == "ann"
    assert record["scope"]["worker"] == "alpha" and record["was_until"]
    assert gateway.decide(decide_body(token))["verdict"] == "ask"
    with pytest.raises(ApprovalClosed):  # once
        approval_window_revoke(approval_id, approver)


def test_another_grant_for_the_same_request_asks_again(gateway, token, ask_grant, approver, make_grant):
    _boxed(gateway, token, approver)
    make_grant(slug="chat-completions", mode="ask", paths=["/v1/chat/completions"])
    answer = gateway.decide(decide_body(token))
    assert answer["verdict"] == "ask" and answer["grant"] == "chat-completions"


def test_a_disabled_grant_is_not_revived_by_a_window(gateway, token, ask_grant, approver):
    _boxed(gateway, token, approver)
    ask_grant.enabled = False
    ask_grant.save()
    assert gateway.decide(decide_body(token))["verdict"] == "deny"


def test_a_plain_approval_opens_no_window(gateway, token, ask_grant, approver):
    _boxed(gateway, token, approver, minutes=0)
    assert gateway.decide(decide_body(token))["verdict"] == "ask"


def test_a_refusal_opens_no_window(gateway, token, ask_grant, approver):
    answer = gateway.decide(decide_body(token))
    with pytest.raises(ApprovalWindowInvalid, match="not a deny"):
        approval_decide(answer["approval_id"], approver, False, "web", window_minutes=10)
    assert Approval.objects.get(pk=answer["approval_id"]).status == "pending"  # nothing changed


@pytest.mark.parametrize("minutes", [61, -5, "ten", 10_000])
def test_a_window_beyond_the_setting_is_refused(gateway, token, ask_grant, approver, minutes):
    answer = gateway.decide(decide_body(token))
    with pytest.raises(ApprovalWindowInvalid):
        approval_decide(answer["approval_id"], approver, True, "web", window_minutes=minutes)
    assert Approval.objects.get(pk=answer["approval_id"]).status == "pending"


def test_the_setting_bounds_and_turns_off_the_choices(settings, gateway, token, ask_grant, approver):
    assert window_choices() == [10, 30, 60]
    settings.ROSTER_APPROVAL_WINDOW_MAX_MINUTES = 45
    assert window_choices() == [10, 30, 45]
    settings.ROSTER_APPROVAL_WINDOW_MAX_MINUTES = 0
    assert window_choices() == []
    answer = gateway.decide(decide_body(token))
    with pytest.raises(ApprovalWindowInvalid, match="turned off"):
        approval_decide(answer["approval_id"], approver, True, "web", window_minutes=10)


def test_the_box_cannot_open_or_extend_a_window(gateway, token, ask_grant, approver):
    """Nothing in a decide body names a window: only an approver's decision sets one."""
    response = gateway.post(DECIDE, decide_body(token, window_minutes=60))
    assert response.status_code == 422 or response.json()["verdict"] != "allow"
    assert not Approval.objects.filter(window_until__isnull=False).exists()


def test_revoking_needs_the_permission(gateway, token, ask_grant, approver):
    from django.core.exceptions import PermissionDenied

    approval_id = _boxed(gateway, token, approver)
    nobody = User.objects.create_user("eve", password="pw-123456789")
    with pytest.raises(PermissionDenied):
        approval_window_revoke(approval_id, nobody)
    assert gateway.decide(decide_body(token))["verdict"] == "allow"
