"""Earned trust (worker + destination [+ kind], a daily rate, an expiry; named in the audit; never for
identity edits) and the host's `proposal` command."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.utils import timezone

from controlplane.audit.models import AuditRecord
from controlplane.core.errors import ValidationFailed
from controlplane.fleet.models import Worker
from controlplane.proposals import previews, services
from controlplane.proposals.models import Proposal, TrustRule
from controlplane.proposals.services import trust_rule_save
from controlplane.proposals.tasks import expire_proposals
from tests.proposals.servers import smtp_server, webhook_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def _rule(worker, dest, **fields):
    return trust_rule_save(
        TrustRule(name=fields.pop("name", "hooks-ok"), worker=worker, destination=dest, **fields),
        actor="admin",
    )


def test_rule_auto_approves_and_is_named_then_rate_limit_holds(gw, token, live_run, make_destination):
    with webhook_server() as (port, receiver):
        dest = make_destination("hooks", kind="webhook", url=f"http://127.0.0.1:{port}/in", method="POST")
        _rule(live_run[0].worker, dest, max_per_day=2)
        ids = [
            gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {"n": n}})[1]["id"]
            for n in range(3)
        ]
        statuses = [Proposal.objects.get(pk=i).status for i in ids]
        assert statuses == ["executed", "executed", "pending"]  # the third waits for a human
        assert len(receiver.requests) == 2
        decided = [
            json.loads(r.body)["data"]
            for r in AuditRecord.objects.filter(kind="proposal")
            if json.loads(r.body)["data"].get("event") == "decided"
        ]
        assert [d["rule"] for d in decided] == ["hooks-ok", "hooks-ok"] and decided[0][
            "by"
        ] == "rule:hooks-ok"
        assert gw.status(token, ids[0])[1]["approved_by_rule"] is True


def test_expired_disabled_or_other_worker_rules_do_not_apply(gw, token, live_run, make_destination):
    dest = make_destination("hooks", kind="webhook", url="http://127.0.0.1:9/in", method="POST")
    other = Worker.objects.create(name="beta")
    # A rule cannot be saved already expired (tests/proposals/test_forms_truths.py): this one expires later.
    old = _rule(live_run[0].worker, dest, name="old", max_per_day=5, expires_at=timezone.now() + timedelta(1))
    TrustRule.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(1))
    _rule(live_run[0].worker, dest, name="off", max_per_day=5, enabled=False)
    _rule(other, dest, name="beta-only", max_per_day=5)
    _rule(live_run[0].worker, dest, name="zero", max_per_day=0)
    _s, body = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {}})
    assert body["status"] == "pending"


def test_no_rule_can_approve_identity_edits(live_run, make_destination, gw, token):
    dest = make_destination("hooks", kind="webhook", url="http://127.0.0.1:9/in", method="POST")
    worker = live_run[0].worker
    with pytest.raises(ValidationFailed):
        _rule(worker, dest, name="id", kind="identity_edit", max_per_day=5)
    with pytest.raises(IntegrityError), transaction.atomic():  # the database refuses it too
        TrustRule.objects.create(
            name="raw", worker=worker, destination=dest, kind="identity_edit", max_per_day=5
        )
    _rule(worker, dest, name="any-kind", max_per_day=5)  # empty kind: still never an identity edit
    status, body = gw.propose(token, {"kind": "identity_edit", "payload": {"identity": "I may do anything."}})
    assert status == 201 and body["status"] == "pending"
    proposal = Proposal.objects.get(pk=body["id"])
    assert proposal.destination is None and proposal.trust_rule is None
    with pytest.raises(ValueError):
        services.proposal_decide(body["id"], None or _approver(), approve=True, channel="rule")


def _approver():
    from django.contrib.auth.models import Group, User

    from controlplane.core.roles import APPROVERS, ensure_roles

    ensure_roles()
    user, _ = User.objects.get_or_create(username="ann")
    user.groups.add(Group.objects.get(name=APPROVERS))
    return User.objects.get(pk=user.pk)


def test_identity_edit_needs_a_human_then_applies_with_a_diff_preview(gw, token, live_run):
    worker = live_run[0].worker
    Worker.objects.filter(pk=worker.pk).update(identity="I write reports.\nI am careful.")
    _s, body = gw.propose(
        token, {"kind": "identity_edit", "payload": {"identity": "I write reports.\nI am bold."}}
    )
    proposal = Proposal.objects.select_related("worker").get(pk=body["id"])
    diff = previews.preview(proposal)["diff"]
    assert "-I am careful." in diff and "+I am bold." in diff
    approver = _approver()
    out = io.StringIO()
    call_command("proposal", "decide", body["id"], "approve", "--user", approver.username, stdout=out)
    assert "executed" in out.getvalue()
    assert Worker.objects.get(pk=worker.pk).identity == "I write reports.\nI am bold."
    # On the record like an admin's edit: under the worker, the text before and after, who approved it.
    edit = AuditRecord.objects.get(kind="grant_change", worker_name=worker.name)
    data = json.loads(edit.body)["data"]
    assert (data["object"], data["action"], data["by"], data["via"]) == (
        "worker_identity", "updated", approver.username, f"proposal {body['id']}")
    assert data["before"] == {"identity": "I write reports.\nI am careful."}
    assert data["after"] == {"identity": "I write reports.\nI am bold."}


def test_cli_list_show_decide_refuse_and_errors(gw, token, make_destination):
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
        email = {
            "kind": "email",
            "destination": "mail",
            "payload": {"to": ["a@example.com"], "subject": "Hi", "body": "Body text"},
        }
        first = gw.propose(token, email)[1]["id"]
        second = gw.propose(token, email)[1]["id"]
        listing = io.StringIO()
        call_command("proposal", "list", "--status", "pending", stdout=listing)
        assert first in listing.getvalue() and "mail to a@example.com: Hi" in listing.getvalue()
        shown = io.StringIO()
        call_command("proposal", "show", first, stdout=shown)
        assert "Body text" in shown.getvalue() and "Message-ID" in shown.getvalue()
        approver = _approver()
        call_command("proposal", "decide", first, "approve", "--user", "ann", stdout=io.StringIO())
        call_command(
            "proposal", "decide", second, "refuse", "--user", "ann", "--reason", "dup", stdout=io.StringIO()
        )
        assert len(mailbox.messages) == 1
        assert Proposal.objects.get(pk=second).reason == "dup"
        with pytest.raises(CommandError):
            call_command("proposal", "decide", second, "approve", "--user", approver.username)
        with pytest.raises(CommandError):
            call_command("proposal", "decide", "not-a-uuid", "approve", "--user", "ann")
        with pytest.raises(CommandError):
            call_command("proposal", "decide", first, "approve", "--user", "nobody")


def test_expiry_is_not_refusal(gw, token, make_destination):
    make_destination("hooks", kind="webhook", url="http://127.0.0.1:9/in", method="POST")
    _s, body = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {}})
    Proposal.objects.filter(pk=body["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(services.ProposalClosed):
        services.proposal_decide(body["id"], _approver(), approve=True, channel="web")
    assert Proposal.objects.get(pk=body["id"]).status == "expired"
    assert gw.status(token, body["id"])[1]["status"] == "expired"
    assert services.proposal_expire_due() == 0
    _s, later = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {"n": 2}})
    Proposal.objects.filter(pk=later["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_proposals() == 1  # the beat task
    assert Proposal.objects.get(pk=later["id"]).status == "expired"
