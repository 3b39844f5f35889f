"""Issue 27.4: a held request whose run ended is closed by the sweep, and its approval post in the
approvers' room is edited to say so (not "expired", not a countdown); replies on it decide nothing."""

from __future__ import annotations

import pytest

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_expire_due
from controlplane.conversations import chat_approvals
from controlplane.conversations.chat_approvals import chat_answer_apply
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_set_status
from tests.conversations.conftest import make_user
from tests.conversations.test_chat_approvals import answer, approval, posted  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def test_the_post_of_a_request_whose_run_ended_is_edited_to_say_so(approvers_room, posted, approval):  # noqa: F811
    assert "waiting for a decision" in chat_approvals.post_text(posted)
    run_set_status(approval.run_id, Run.Status.STARTING)
    run_set_status(approval.run_id, Run.Status.FAILED, reason="box exited")
    assert approval_expire_due() == 1
    [due] = chat_approvals.posts_to_edit()
    text = chat_approvals.post_text(due)
    assert f"Status: closed: run {approval.run_id} ended (failed); no decision is needed any more" in text
    assert "left (until" not in text
    chat_approvals.post_edited(due)
    assert chat_approvals.posts_to_edit() == []
    make_user("bob", approver=True, chat_id="@bob:roster.test")
    assert chat_answer_apply(answer(approvers_room, "@bob:roster.test", True)) == "already_closed"
    approval.refresh_from_db()
    assert approval.status == Approval.Status.EXPIRED and approval.decided_by is None


def test_a_request_that_simply_expired_still_says_expired(approvers_room, posted, approval):  # noqa: F811
    from datetime import timedelta

    from django.utils import timezone

    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    approval_expire_due()
    [due] = chat_approvals.posts_to_edit()
    assert "Status: expired" in chat_approvals.post_text(due)
