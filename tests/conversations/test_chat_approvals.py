"""Approvals over chat: only a reply or reaction on the post, by an allowlisted approver, decides it,
through the web's own services (first decision wins, expired cannot be approved, reasons kept); anything
else on the post is ignored and audited; the audit has the approver and the post id."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_decide, approval_open, request_snapshot
from controlplane.audit.models import AuditRecord
from controlplane.conversations import chat_approvals
from controlplane.conversations.chat_approvals import ChatAnswer, chat_answer_apply
from controlplane.conversations.models import ApprovalPost, Channel
from controlplane.fleet.services import run_create
from controlplane.proposals.models import Proposal
from tests.conversations.conftest import make_user

POST_ID = "$post:roster.test"


# As the decision path records it (request_snapshot masks what an approver must not see).
def snapshot() -> dict:
    return request_snapshot(
        method="POST",
        url="https://api.example.org/v1/deploy?token=abc123",
        headers=[("authorization", "Bearer sk-live-REALSECRET"), ("content-type", "application/json")],
        body_preview='{"env": "prod"}',
        body_sha256="ab" * 32,
        body_size=15,
    )


@pytest.fixture
def approval(worker, db):
    run, _ = run_create(worker, command=["true"])
    return approval_open(run=run, grant_id=None, grant_slug="deploy-api", snapshot=snapshot())


@pytest.fixture
def posted(approvers_room, approval):
    [(channel, post)] = chat_approvals.subjects_to_post()
    assert channel == approvers_room and post.approval == approval
    chat_approvals.post_sent(post, POST_ID)
    post.refresh_from_db()
    return post


def answer(room, sender, approve, reason="", post=POST_ID, event="$e1") -> ChatAnswer:
    return ChatAnswer(room, post, sender, event, approve, reason)


def _decided_record(approval) -> dict:
    for record in AuditRecord.objects.filter(kind="approval").order_by("seq"):
        data = json.loads(record.body)["data"]
        if data.get("event") == "decided" and data["approval"] == str(approval.pk):
            return data
    raise AssertionError("no decision recorded")


def test_the_post_quotes_the_request_as_data_with_credentials_masked(posted, approval):
    text = chat_approvals.post_text(posted)
    assert f"held request {approval.pk} of worker chat-worker" in text and "grant deploy-api" in text
    assert "    POST https://api.example.org/v1/deploy" in text and "content-type: application/json" in text
    assert "REALSECRET" not in text and "abc123" not in text
    assert "s left (until" in text and '{"env": "prod"}' in text


def test_an_allowlisted_approvers_reaction_decides_and_the_audit_has_approver_and_post(
    approvers_room, posted, approval
):
    make_user("bob", approver=True, chat_id="@bob:roster.test")
    assert chat_answer_apply(answer(approvers_room, "@bob:roster.test", True)) == "decided"
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED and approval.channel == "chat"
    record = _decided_record(approval)
    assert record["by"] == "bob" and record["channel"] == "chat"
    assert record["evidence"] == {
        "post": POST_ID,
        "event": "$e1",
        "chat_user": "@bob:roster.test",
        "chat_channel": "approvers",
    }


@pytest.mark.parametrize("who", ["stranger", "linked_not_approver", "inactive_approver"])
def test_anyone_else_on_the_post_is_ignored_and_audited(approvers_room, posted, approval, who):
    if who == "linked_not_approver":
        make_user("carl", chat_id="@x:roster.test")
    elif who == "inactive_approver":
        user = make_user("dora", approver=True, chat_id="@x:roster.test")
        user.is_active = False
        user.save()
    assert chat_answer_apply(answer(approvers_room, "@x:roster.test", True)) == "not_allowlisted"
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
    ignored = json.loads(AuditRecord.objects.filter(kind="chat_approval", verdict="ignored").get().body)[
        "data"
    ]
    assert ignored["why"] == "not_allowlisted" and ignored["sender"] == "@x:roster.test"
    assert ignored["post"] == POST_ID


def test_a_reply_elsewhere_or_without_a_decision_decides_nothing(approvers_room, posted, approval):
    make_user("bob", approver=True, chat_id="@bob:roster.test")
    assert chat_answer_apply(answer(approvers_room, "@bob:roster.test", True, post="$other")) == "not_a_post"
    assert chat_answer_apply(answer(approvers_room, "@bob:roster.test", None)) == "not_a_decision"
    other_room = Channel.objects.create(
        name="elsewhere",
        kind="matrix",
        purpose="approvals",
        server=approvers_room.server,
        room_id="!elsewhere:roster.test",
    )
    assert chat_answer_apply(answer(other_room, "@bob:roster.test", True)) == "not_a_post"
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


def test_first_decision_wins_and_the_reason_is_kept(approvers_room, posted, approval):
    bob = make_user("bob", approver=True, chat_id="@bob:roster.test")
    make_user("eve", approver=True, chat_id="@eve:roster.test")
    assert (
        chat_answer_apply(answer(approvers_room, "@bob:roster.test", False, "not on a Friday")) == "decided"
    )
    assert (
        chat_answer_apply(answer(approvers_room, "@eve:roster.test", True, event="$e2")) == "already_closed"
    )
    approval.refresh_from_db()
    assert approval.status == Approval.Status.REFUSED and approval.comment == "not on a Friday"
    assert approval.decided_by == bob


def test_an_expired_request_cannot_be_approved_from_chat(approvers_room, posted, approval):
    make_user("bob", approver=True, chat_id="@bob:roster.test")
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert chat_answer_apply(answer(approvers_room, "@bob:roster.test", True)) == "already_closed"
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING  # the sweep marks it expired; never approved


def test_a_web_decision_and_expiry_make_the_post_due_for_an_edit(approvers_room, posted, approval):
    assert chat_approvals.posts_to_edit() == []
    approval_decide(approval.pk, make_user("web", approver=True), True, "web")
    [due] = chat_approvals.posts_to_edit()
    assert "approved by web via web" in chat_approvals.post_text(due)
    chat_approvals.post_edited(due)
    assert chat_approvals.posts_to_edit() == []


def test_proposals_are_posted_and_decided_the_same_way(approvers_room, worker):
    run, _ = run_create(worker, command=["true"])
    proposal = Proposal.objects.create(
        run=run,
        worker=worker,
        kind="identity_edit",
        payload={"identity": "new"},
        payload_sha256="0" * 64,
        taint=1,
        untrusted=False,
        expires_at=timezone.now() + timedelta(hours=1),
        idempotency_key="k1",
    )
    [(_, post)] = chat_approvals.subjects_to_post()
    chat_approvals.post_sent(post, "$prop")
    make_user("bob", approver=True, chat_id="@bob:roster.test")
    assert "identity_edit" in chat_approvals.post_text(ApprovalPost.objects.get(pk=post.pk))
    assert chat_answer_apply(answer(approvers_room, "@bob:roster.test", True, post="$prop")) == "decided"
    proposal.refresh_from_db()
    assert proposal.status == "approved" and proposal.channel == "chat"


@pytest.mark.parametrize(
    ("body", "decision"),
    [
        ("approve", (True, "")),
        ("> <@bot> Roster: held request\n\nrefuse not today", (False, "not today")),
        ("Deny: too risky", (False, "too risky")),
        ("maybe later", (None, "")),
        ("> approve\n\nhmm", (None, "")),
    ],
)
def test_reply_words(body, decision):
    assert chat_approvals.answer_from_reply(body) == decision


def test_a_worker_without_its_own_room_uses_the_global_one(approvers_room, worker, server):
    assert chat_approvals.approvers_channel_for(worker.pk) == approvers_room
    own = Channel.objects.create(
        name="ops-approvers",
        kind="matrix",
        purpose="approvals",
        worker=worker,
        server=server,
        room_id="!own:roster.test",
    )
    assert chat_approvals.approvers_channel_for(worker.pk) == own
