"""Issue 27.8: a failed proposal retried from the web (approvers and admins; the same service as the CLI's
`proposal retry`, audited; refused for a proposal that has not failed), and the confirmations after a
decision say in words what was approved or denied."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group, User
from django.contrib.messages import get_messages
from django.test import Client

from controlplane.audit.models import AuditRecord
from controlplane.core.roles import ADMINS, AUDITORS
from controlplane.proposals import services
from controlplane.proposals.models import Proposal
from tests.proposals.servers import free_port, webhook_server

pytestmark = pytest.mark.django_db(transaction=True)


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def _events(proposal_id) -> list[dict]:
    return [json.loads(r.body)["data"] for r in AuditRecord.objects.filter(kind="proposal")
            if json.loads(r.body)["data"].get("proposal") == str(proposal_id)]


@pytest.fixture
def failed(gw, token, make_destination, approver, settings):
    """A webhook proposal whose destination did not answer: failed after its bounded attempts."""
    settings.ROSTER_EXECUTOR_MAX_ATTEMPTS = 1
    port = free_port()
    make_destination("hooks", kind="webhook", url=f"http://127.0.0.1:{port}/in", method="POST")
    _s, body = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {"n": 1}})
    services.proposal_decide(body["id"], approver, approve=True, channel="cli")
    assert Proposal.objects.get(pk=body["id"]).status == "failed"
    return body["id"], port


def test_an_approver_retries_a_failed_proposal_from_the_queue(failed, approver):
    proposal_id, port = failed
    client = _client(approver)
    page = client.get("/approvals/").content.decode()
    assert f'action="/proposals/{proposal_id}/retry/"' in page and ">Retry</button>" in page
    with webhook_server(port) as (_port, receiver):
        response = client.post(f"/proposals/{proposal_id}/retry/")
        assert response.status_code == 302
        assert Proposal.objects.get(pk=proposal_id).status == "executed" and len(receiver.requests) == 1
    said = _said(response)
    assert said and said[0].startswith("Sent again: post ") and "to the webhook hooks" in said[0]
    retry = [e for e in _events(proposal_id) if e["event"] == "retry"]
    assert len(retry) == 1 and retry[0]["by"] == "ann"


def test_an_admin_may_retry(failed):
    admin = User.objects.create_user("dora", password="pw-dora-123456")
    admin.groups.add(Group.objects.get(name=ADMINS))
    proposal_id, _port = failed
    assert _client(admin).post(f"/proposals/{proposal_id}/retry/").status_code == 302
    assert any(e["event"] == "retry" for e in _events(proposal_id))


def test_retry_is_refused_without_the_permission(failed):
    auditor = User.objects.create_user("carl", password="pw-carl-123456")
    auditor.groups.add(Group.objects.get(name=AUDITORS))
    proposal_id, _port = failed
    client = _client(auditor)
    assert ">Retry</button>" not in client.get("/approvals/").content.decode()
    assert client.post(f"/proposals/{proposal_id}/retry/").status_code == 403
    assert Client().post(f"/proposals/{proposal_id}/retry/").status_code == 302  # to the login page
    assert Proposal.objects.get(pk=proposal_id).status == "failed"
    assert not any(e["event"] == "retry" for e in _events(proposal_id))


def test_retry_is_refused_for_a_proposal_that_has_not_failed(gw, token, make_destination, approver):
    make_destination("hooks", kind="webhook", url="http://127.0.0.1:9/in", method="POST")
    _s, body = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {}})
    client = _client(approver)
    response = client.post(f"/proposals/{body['id']}/retry/")
    assert response.status_code == 302 and "only a failed proposal can be retried" in _said(response)[0]
    assert Proposal.objects.get(pk=body["id"]).status == "pending"
    assert client.get(f"/proposals/{body['id']}/retry/").status_code == 405
    assert client.post("/proposals/00000000-0000-0000-0000-000000000000/retry/").status_code == 404


def test_confirmations_say_what_was_decided(gw, token, make_destination, approver):
    make_destination("mail", kind="smtp", smtp_host="127.0.0.1", smtp_port=9, starttls=False,
                     from_address="bot@example.com", allowed_recipients=["@example.org"])
    client = _client(approver)
    _s, mail = gw.propose(token, {"kind": "email", "destination": "mail", "payload": {
        "to": ["ops@example.org"], "subject": "Weekly   report\u202e", "body": "hello"}})
    said = _said(client.post(f"/proposals/{mail['id']}/decide/", {"action": "deny", "reason": "not today"}))
    run_id = Proposal.objects.get(pk=mail["id"]).run_id
    assert said == ["Denied: send e-mail to ops@example.org through mail, subject “Weekly report\\u202e”, "
                    f"for alpha (run {run_id}), with the reason: not today"]
    _s, task = gw.propose(token, {"kind": "follow_up", "payload": {"task": "check the nightly build"}})
    said = _said(client.post(f"/proposals/{task['id']}/decide/", {"action": "approve"}))
    assert said[-1].startswith("Approved: queue the follow-up task “check the nightly build”, for alpha")
    assert str(task["id"]) not in said[-1]  # words, not ids
