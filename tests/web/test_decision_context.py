"""Decisions with context: the approver's comment (audited, required for a deny when configured, sent
back to the box), card states (box stopped waiting, run ended) and expired requests kept in view."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.approvals.services import (
    ApprovalClosed,
    ApprovalCommentInvalid,
    approval_abandon,
    approval_decide,
)
from controlplane.audit.models import AuditRecord
from controlplane.fleet.models import Run
from tests.web.conftest import open_approval
from tests.web.test_approval_views import QUEUE, _csrf_post, _decide_url, _login


def test_deny_with_comment_is_audited_and_confirmed_in_words(approver, approval):
    client = _login(approver, csrf=True)
    _csrf_post(client, _decide_url(approval), {"action": "deny", "comment": "not during the freeze"})
    approval.refresh_from_db()
    assert approval.status == Approval.Status.REFUSED and approval.comment == "not during the freeze"
    record = AuditRecord.objects.filter(kind="approval", verdict="refused").get()
    assert '"comment":"not during the freeze"' in record.body
    html = client.get(QUEUE).content.decode()
    assert "Denied POST api.example.com/v1/post for alpha" in html
    assert str(approval.pk) not in html.split('id="decided-')[0]  # the confirmation names no UUID
    assert "not during the freeze" in html  # in the recently decided list


def test_approve_confirmation_uses_the_buttons_verb(approver, approval):
    client = _login(approver, csrf=True)
    _csrf_post(client, _decide_url(approval), {"action": "approve"})
    html = client.get(QUEUE).content.decode()
    assert "Approved POST api.example.com/v1/post for alpha (run" in html


def test_required_deny_comment_missing_changes_nothing(approver, approval, settings):
    settings.ROSTER_APPROVAL_DENY_COMMENT_REQUIRED = True
    before = AuditRecord.objects.count()
    client = _login(approver, csrf=True)
    html = client.get(QUEUE).content.decode()
    assert "(required to deny)" in html
    _csrf_post(client, _decide_url(approval), {"action": "deny", "comment": "   "})
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
    assert AuditRecord.objects.count() == before
    assert "a reason is required to deny" in client.get(QUEUE).content.decode()
    approval_decide(approval.pk, approver, True, "cli")  # approving needs no comment
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED


def test_comment_is_bounded_and_cleaned(approver, approval, settings):
    with pytest.raises(ApprovalCommentInvalid):
        approval_decide(approval.pk, approver, False, "web", comment="x" * 501)
    approval_decide(approval.pk, approver, False, "web", comment="line one\nline\x00two\x1b[31m")
    approval.refresh_from_db()
    assert approval.comment == "line one line two [31m"


def test_abandoned_card_says_the_box_stopped_waiting(approver, approval):
    html = _login(approver).get(QUEUE).content.decode()
    assert "box stopped waiting" not in html
    approval_abandon(approval.pk)
    html = _login(approver).get(QUEUE).content.decode()
    assert "The box stopped waiting" in html and "identical retry" in html
    assert 'value="approve"' in html  # still approvable: it opens the grace window


def test_run_ended_card_cannot_be_approved_and_server_refuses(approver, approval):
    Run.objects.filter(pk=approval.run_id).update(status=Run.Status.SUCCEEDED)
    client = _login(approver, csrf=True)
    html = client.get(QUEUE).content.decode()
    assert "Run ended." in html
    assert 'value="approve"' not in html and 'value="deny"' in html
    _csrf_post(client, _decide_url(approval), {"action": "approve"})  # a hand-made post
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
    assert "cannot be approved" in client.get(QUEUE).content.decode()
    with pytest.raises(ApprovalClosed):
        approval_decide(approval.pk, approver, True, "cli")
    approval_decide(approval.pk, approver, False, "cli", comment="run is over")  # clearing it is fine
    approval.refresh_from_db()
    assert approval.status == Approval.Status.REFUSED


def test_expired_requests_stay_in_recently_decided(approver, run):
    expired = open_approval(run, url="https://old.example.com/a")
    Approval.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=5))
    for i in range(12):  # more decisions than the list shows, all decided before the expiry
        other = open_approval(run, url=f"https://new.example.com/{i}")
        approval_decide(other.pk, approver, True, "cli")
        Approval.objects.filter(pk=other.pk).update(decided_at=timezone.now() - timedelta(seconds=60))
    html = _login(approver).get(QUEUE).content.decode()
    assert f'id="decided-{expired.pk}" data-status="expired"' in html
    assert "expired — nobody answered in time" in html
    assert f'id="approval-{expired.pk}"' not in html
    assert reverse("web:approvals")


def test_user_without_a_role_gets_an_explanation_and_a_sign_out(nobody, approver):
    client = _login(nobody)
    for path in ("/", QUEUE):
        response = client.get(path)
        assert response.status_code == 403
        html = response.content.decode()
        assert "Your account has no role yet" in html and "eve-nobody" in html
        assert 'id="no-role-sign-out"' in html and "csrfmiddlewaretoken" in html
    response = _login(approver).get(reverse("web:audit"))
    assert response.status_code == 403
    assert "does not include this page" in response.content.decode()
