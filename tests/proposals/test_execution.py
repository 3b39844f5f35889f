"""Deciding and executing proposals against real servers: aiosmtpd, an HTTP receiver, a bare Git repo.
Exactly once, bounded retries, a manual retry that succeeds once, credentials never recorded."""

from __future__ import annotations

import base64
import json

import pytest
from django.core.exceptions import PermissionDenied

from controlplane.audit.models import AuditRecord
from controlplane.proposals import services
from controlplane.proposals.models import Proposal
from controlplane.proposals.tasks import execute_proposal
from controlplane.vault import services as vault_services
from tests.proposals.conftest import SMTP_PASSWORD, WEBHOOK_SECRET
from tests.proposals.servers import bare_repo, free_port, git, make_patch, smtp_server, webhook_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def _events(proposal_id) -> list[str]:
    return [
        json.loads(r.body)["data"]["event"]
        for r in AuditRecord.objects.filter(kind="proposal")
        if json.loads(r.body)["data"].get("proposal") == str(proposal_id)
    ]


def _no_secret_anywhere(*values):
    for record in AuditRecord.objects.all():
        for value in values:
            assert value not in record.body
    for proposal in Proposal.objects.all():
        for value in values:
            assert value not in json.dumps(proposal.result) and value not in json.dumps(proposal.payload)


def test_approved_email_arrives_exactly_once(gw, token, make_destination, approver):
    with smtp_server() as (port, mailbox):
        make_destination(
            "mail",
            kind="smtp",
            smtp_host="127.0.0.1",
            smtp_port=port,
            starttls=False,
            from_address="bot@example.com",
            allowed_recipients=["@example.com"],
        )
        status, body = gw.propose(
            token,
            {
                "kind": "email",
                "destination": "mail",
                "payload": {"to": ["ops@example.com"], "subject": "Report", "body": "All green.\n"},
            },
        )
        assert status == 201 and mailbox.messages == []  # held: nothing sent before a human says yes
        services.proposal_decide(body["id"], approver, approve=True, channel="cli", reason="looks right")
        proposal = Proposal.objects.get(pk=body["id"])
        assert proposal.status == "executed", proposal.result
        assert len(mailbox.messages) == 1
        sender, rcpts, content = mailbox.messages[0]
        assert sender == "bot@example.com" and rcpts == ["ops@example.com"]
        assert b"Subject: Report" in content and b"All green." in content
        assert proposal.idempotency_key.encode() in content  # Message-ID
        # A redelivered task, a second executor, a manual kick: nothing is sent twice.
        assert execute_proposal.apply(args=(body["id"],)).get() == "skipped"
        with pytest.raises(services.ProposalClosed):
            services.proposal_retry(body["id"], approver)
        assert len(mailbox.messages) == 1
        assert gw.status(token, body["id"])[1]["status"] == "executed"
        assert _events(body["id"]) == ["proposed", "decided", "executing", "executed"]


def test_smtp_login_uses_the_vault_secret_and_never_records_it(gw, token, make_destination, approver):
    vault_services.secret_set("smtp", SMTP_PASSWORD)
    with smtp_server() as (port, mailbox):
        make_destination(
            "mail",
            kind="smtp",
            smtp_host="127.0.0.1",
            smtp_port=port,
            starttls=False,
            login="roster",
            secret="smtp",
            from_address="bot@example.com",
            allowed_recipients=["ops@example.com"],
        )
        _s, body = gw.propose(
            token,
            {
                "kind": "email",
                "destination": "mail",
                "payload": {"to": ["ops@example.com"], "subject": "x", "body": "y"},
            },
        )
        services.proposal_decide(body["id"], approver, approve=True, channel="cli")
        proposal = Proposal.objects.get(pk=body["id"])
        # aiosmtpd without auth configured refuses AUTH: a failure, recorded without the password.
        assert proposal.status == "failed" and mailbox.messages == []
    _no_secret_anywhere(SMTP_PASSWORD)


def test_refused_proposal_is_never_sent(gw, token, make_destination, approver):
    with webhook_server() as (port, receiver):
        make_destination("hooks", kind="webhook", url=f"http://127.0.0.1:{port}/in", method="POST")
        _s, body = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {"a": 1}})
        services.proposal_decide(body["id"], approver, approve=False, channel="web", reason="not today")
        assert receiver.requests == []
        assert Proposal.objects.get(pk=body["id"]).status == "refused"
        answer = gw.status(token, body["id"])[1]
        assert answer["status"] == "refused" and answer["reason"] == "not today"
        with pytest.raises(services.ProposalClosed):
            services.proposal_decide(body["id"], approver, approve=True, channel="web")


def test_webhook_delivered_with_secret_header_once(gw, token, make_destination, approver):
    vault_services.secret_set("whsec", WEBHOOK_SECRET)
    with webhook_server() as (port, receiver):
        make_destination(
            "hooks",
            kind="webhook",
            url=f"http://127.0.0.1:{port}/in",
            method="POST",
            headers={"X-Source": "roster"},
            secret="whsec",
            secret_header="X-Signature",
            secret_format="Token {secret}",
        )
        _s, body = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {"text": "hi"}})
        services.proposal_decide(body["id"], approver, approve=True, channel="web")
        assert len(receiver.requests) == 1
        got = receiver.requests[0]
        assert got["body"] == {"text": "hi"} and got["headers"]["X-Signature"] == f"Token {WEBHOOK_SECRET}"
        assert got["headers"]["X-Source"] == "roster"
        proposal = Proposal.objects.get(pk=body["id"])
        assert got["headers"]["Idempotency-Key"] == proposal.idempotency_key
        assert proposal.status == "executed" and proposal.result["summary"] == "HTTP 200"
    _no_secret_anywhere(WEBHOOK_SECRET)


def test_server_down_fails_after_bounded_retries_then_manual_retry_succeeds_once(
    gw, token, make_destination, approver, settings
):
    settings.ROSTER_EXECUTOR_MAX_ATTEMPTS = 3
    port = free_port()
    make_destination("hooks", kind="webhook", url=f"http://127.0.0.1:{port}/in", method="POST")
    _s, body = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {"n": 1}})
    services.proposal_decide(body["id"], approver, approve=True, channel="cli")
    proposal = Proposal.objects.get(pk=body["id"])
    assert proposal.status == "failed" and proposal.attempts == 3
    assert proposal.result["summary"] == "no answer"
    assert _events(body["id"]).count("executing") == 3 and _events(body["id"])[-1] == "failed"
    with webhook_server(port) as (_port, receiver):
        services.proposal_retry(body["id"], approver)
        assert Proposal.objects.get(pk=body["id"]).status == "executed"
        assert len(receiver.requests) == 1
        assert execute_proposal.apply(args=(body["id"],)).get() == "skipped"
        assert len(receiver.requests) == 1


def test_webhook_4xx_is_final_5xx_is_retried(gw, token, make_destination, approver):
    with webhook_server() as (port, receiver):
        make_destination("hooks", kind="webhook", url=f"http://127.0.0.1:{port}/in", method="POST")
        receiver.statuses = [503, 200]
        _s, body = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {"n": 1}})
        services.proposal_decide(body["id"], approver, approve=True, channel="cli")
        assert Proposal.objects.get(pk=body["id"]).status == "executed" and len(receiver.requests) == 2
        receiver.statuses = [400]
        _s, body = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {"n": 2}})
        services.proposal_decide(body["id"], approver, approve=True, channel="cli")
        proposal = Proposal.objects.get(pk=body["id"])
        assert (
            proposal.status == "failed"
            and proposal.attempts == 1
            and proposal.result["summary"] == "HTTP 400"
        )


def test_git_push_lands_in_bare_repo_and_hook_refusal_is_recorded(
    gw, token, make_destination, approver, tmp_path
):
    remote, work, base = bare_repo(tmp_path)
    patch = make_patch(work, base)
    make_destination(
        "repo", kind="git", url=f"file://{remote}", branch_pattern="*", protected_branches=["main"]
    )
    status, body = gw.propose(
        token,
        {
            "kind": "git_push",
            "destination": "repo",
            "payload": {"branch": "roster/world", "base_commit": base, "patch": patch},
        },
    )
    assert status == 201, body
    services.proposal_decide(body["id"], approver, approve=True, channel="cli")
    proposal = Proposal.objects.get(pk=body["id"])
    assert proposal.status == "executed", proposal.result
    assert git("show", "roster/world:README", cwd=remote) == "hello\nworld"
    assert git("rev-parse", "main", cwd=remote) == base  # main untouched
    # protected on the destination: refused at proposal time, nothing recorded
    got, answer = gw.propose(
        token,
        {
            "kind": "git_push",
            "destination": "repo",
            "payload": {"branch": "main", "base_commit": base, "patch": patch},
        },
    )
    assert (got, answer["error"]) == (403, "branch_not_allowed")
    # refused by the remote itself (its hook): failed, with the remote's answer
    _s, body = gw.propose(
        token,
        {
            "kind": "git_push",
            "destination": "repo",
            "payload": {"branch": "frozen-1", "base_commit": base, "patch": patch},
        },
    )
    services.proposal_decide(body["id"], approver, approve=True, channel="cli")
    proposal = Proposal.objects.get(pk=body["id"])
    assert proposal.status == "failed" and "frozen branches take no pushes" in proposal.result["detail"]
    assert proposal.attempts == 1


def test_only_approvers_decide(gw, token, make_destination, django_user_model):
    make_destination("hooks", kind="webhook", url="http://127.0.0.1:9/in", method="POST")
    _s, body = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {}})
    nobody = django_user_model.objects.create_user("nobody", password="pw-nobody-123")
    with pytest.raises(PermissionDenied):
        services.proposal_decide(body["id"], nobody, approve=True, channel="web")
    assert Proposal.objects.get(pk=body["id"]).status == "pending"


def test_git_bundle_push_and_push_preview(gw, token, make_destination, approver, tmp_path):
    from controlplane.proposals import previews

    remote, work, base = bare_repo(tmp_path)
    patch = make_patch(work, base)
    git("bundle", "create", str(tmp_path / "p.bundle"), f"{base}..HEAD", cwd=work)
    make_destination("repo", kind="git", url=f"file://{remote}", branch_pattern="roster/*")
    _s, from_patch = gw.propose(
        token,
        {
            "kind": "git_push",
            "destination": "repo",
            "payload": {"branch": "roster/a", "base_commit": base, "patch": patch},
        },
    )
    shown = previews.preview(
        Proposal.objects.select_related("worker", "destination").get(pk=from_patch["id"])
    )
    assert [c["subject"] for c in shown["commits"]] == ["Say world"]
    assert shown["files"] == [{"file": "README", "added": 1, "removed": 0}]
    bundle_b64 = base64.b64encode((tmp_path / "p.bundle").read_bytes()).decode()
    status, body = gw.propose(
        token,
        {
            "kind": "git_push",
            "destination": "repo",
            "payload": {"branch": "roster/b", "base_commit": base, "bundle_b64": bundle_b64},
        },
    )
    assert status == 201, body
    assert previews.preview(Proposal.objects.select_related("worker", "destination").get(pk=body["id"]))[
        "bundle_refs"
    ]
    services.proposal_decide(body["id"], approver, approve=True, channel="cli")
    assert Proposal.objects.get(pk=body["id"]).status == "executed"
    assert git("show", "roster/b:README", cwd=remote) == "hello\nworld"
    got, answer = gw.propose(
        token,
        {
            "kind": "git_push",
            "destination": "repo",
            "payload": {
                "branch": "roster/c",
                "base_commit": base,
                "bundle_b64": base64.b64encode(b"not a bundle").decode(),
            },
        },
    )
    assert (got, answer["error"]) == (422, "invalid_proposal")


def test_destination_disabled_after_approval_is_not_sent(gw, token, make_destination, approver):
    with webhook_server() as (port, receiver):
        make_destination("hooks", kind="webhook", url=f"http://127.0.0.1:{port}/in", method="POST")
        _s, body = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {"n": 1}})
        from controlplane.proposals.models import Destination

        Destination.objects.filter(name="hooks").update(enabled=False)
        services.proposal_decide(body["id"], approver, approve=True, channel="cli")
        proposal = Proposal.objects.get(pk=body["id"])
        assert proposal.status == "failed" and proposal.result["summary"] == "destination disabled"
        assert receiver.requests == []
