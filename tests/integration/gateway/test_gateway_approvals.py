"""Ask: the gateway holds the request while the approval is open, without stalling other flows."""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth.models import Group, User
from django.db import close_old_connections

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_decide
from controlplane.core.roles import APPROVERS
from tests.integration.gateway.conftest import HOLD_SECONDS, box_client, deny_body, grant, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def approver(stack):
    user = User.objects.create_user(f"ann{time.monotonic_ns()}", password="pw-123456789")
    user.groups.add(Group.objects.get(name=APPROVERS))
    return user


def _decide_when_pending(approver, approve: bool, results: list) -> threading.Thread:
    def work():
        try:
            approval = wait_until(lambda: Approval.objects.filter(status="pending").first(), timeout=10)
            assert approval is not None, "no approval was opened"
            approval_decide(approval.pk, approver, approve, "web")
            results.append(approval.pk)
        finally:
            close_old_connections()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_ask_then_approve_forwards_the_held_request(stack, token, approver):
    grant("asked", stack.http, mode="ask")
    results: list = []
    thread = _decide_when_pending(approver, True, results)
    with box_client(stack.gateway, token) as box:
        response = box.post(stack.http.url("/send"), content=b"payload")
    thread.join(5)
    assert response.status_code == 200, response.text
    assert [r["body"] for r in stack.http.requests] == [b"payload"]
    assert Approval.objects.get(pk=results[0]).status == "used"


def test_ask_then_refuse(stack, token, approver):
    grant("asked", stack.http, mode="ask")
    results: list = []
    thread = _decide_when_pending(approver, False, results)
    with box_client(stack.gateway, token) as box:
        response = box.post(stack.http.url("/send"), content=b"payload")
    thread.join(5)
    assert response.status_code == 403
    assert deny_body(response)["reason"] == "approval_refused"
    assert stack.http.requests == []


def test_ask_then_expire_abandons_and_a_held_request_does_not_stall_others(stack, token):
    grant("asked", stack.http, mode="ask", paths=["/send"])
    grant("free", stack.other)
    outcome: dict = {}

    def held():
        with box_client(stack.gateway, token) as box:
            start = time.monotonic()
            outcome["response"] = box.post(stack.http.url("/send"), content=b"payload")
            outcome["elapsed"] = time.monotonic() - start

    thread = threading.Thread(target=held, daemon=True)
    thread.start()
    assert wait_until(lambda: Approval.objects.filter(status="pending").exists())
    with box_client(stack.gateway, token) as box:
        start = time.monotonic()
        quick = box.get(stack.other.url("/meanwhile"))
        quick_elapsed = time.monotonic() - start
    assert quick.status_code == 200 and quick_elapsed < HOLD_SECONDS / 2
    thread.join(HOLD_SECONDS + 10)
    response = outcome["response"]
    assert response.status_code == 403
    assert deny_body(response)["reason"] == "approval_expired"
    assert HOLD_SECONDS - 0.5 < outcome["elapsed"] < HOLD_SECONDS + 5
    assert stack.http.requests == []
    approval = Approval.objects.get()
    assert wait_until(lambda: Approval.objects.get(pk=approval.pk).abandoned_at is not None)


def test_approval_after_the_hold_lets_the_identical_request_pass_once(stack, token, approver):
    grant("asked", stack.http, mode="ask")
    with box_client(stack.gateway, token) as box:
        first = box.post(stack.http.url("/send"), content=b"same body")
        assert deny_body(first)["reason"] == "approval_expired"
        approval = Approval.objects.get()
        assert wait_until(lambda: Approval.objects.get(pk=approval.pk).abandoned_at is not None)
        approval_decide(approval.pk, approver, True, "web")  # the approver answers late
        again = box.post(stack.http.url("/send"), content=b"same body")
        assert again.status_code == 200, again.text
    assert [r["body"] for r in stack.http.requests] == [b"same body"]


@pytest.mark.parametrize("header,replay", [("authorization", "Bearer someone-else"),
                                           ("content-type", "text/plain"),
                                           ("x-http-method-override", "POST")])
def test_a_late_approval_does_not_pass_a_replay_with_another_header(stack, token, approver, header, replay):
    grant("asked", stack.http, mode="ask")
    headers = {"authorization": "Bearer approved-one", "content-type": "application/json"}
    with box_client(stack.gateway, token) as box:
        first = box.post(stack.http.url("/send"), content=b"{}", headers=headers)
        assert deny_body(first)["reason"] == "approval_expired", first.text
        approval = Approval.objects.get()
        assert {"authorization", "content-type"} <= set(approval.request["bound_headers"])
        assert wait_until(lambda: Approval.objects.get(pk=approval.pk).abandoned_at is not None)
        approval_decide(approval.pk, approver, True, "web")
        changed = {**headers, header: replay}
        replayed = box.post(stack.http.url("/send"), content=b"{}", headers=changed)
        assert replayed.status_code != 200  # a new request: it asks again and is held, then expires
        assert deny_body(replayed)["reason"] == "approval_expired"
        same = box.post(stack.http.url("/send"), content=b"{}", headers=headers)
        # On failure, the approvals as stored say whether the late approval was consumed or never matched.
        assert same.status_code == 200, (same.text, list(Approval.objects.order_by("created_at").values_list(
            "status", "request_digest", "grace_until", "abandoned_at", "used_at")))
    [seen] = stack.http.requests
    assert seen["headers"]["authorization"] == "Bearer approved-one"
    assert seen["headers"]["content-type"] == "application/json"
