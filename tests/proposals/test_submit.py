"""Proposals from a box, through the gateway's calls: strict schemas, destination rules, taint ceiling,
cost against caps, provenance, and nothing but an audited rejection for a rejected proposal."""

from __future__ import annotations

import base64
import json

import pytest

from controlplane.audit.models import AuditRecord
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Run, RunDecision
from controlplane.fleet.services import run_create, run_set_status, worker_create
from controlplane.ledger.models import Cap, SpendLine
from controlplane.proposals.models import Proposal
from tests.egress.fixtures import BOX_ADDRESS

pytestmark = pytest.mark.django_db

EMAIL = {
    "kind": "email",
    "destination": "mail",
    "payload": {"to": ["ops@example.com"], "subject": "Weekly report", "body": "All green."},
    "reason": "the team asked for a weekly report",
}


def mail(**content) -> dict:
    return {**EMAIL, "payload": {**EMAIL["payload"], **content}}


def push(branch: str) -> dict:
    content = {"branch": branch, "base_commit": "a" * 40, "patch": "x\ndiff --git a/f b/f\n"}
    return {"kind": "git_push", "destination": "repo", "payload": content}


HOOK = {"kind": "webhook", "destination": "hooks", "payload": {"text": "deployed", "n": 3}}


@pytest.fixture
def dests(make_destination):
    make_destination(
        "mail",
        kind="smtp",
        smtp_host="127.0.0.1",
        smtp_port=2525,
        starttls=False,
        from_address="bot@example.com",
        allowed_recipients=["ops@example.com", "@example.org"],
    )
    make_destination("hooks", kind="webhook", url="http://127.0.0.1:9/hook", method="POST")
    make_destination(
        "repo",
        kind="git",
        url="file:///nonexistent.git",
        branch_pattern="roster/*",
        protected_branches=["main"],
    )


def _rejections():
    return [json.loads(r.body)["data"] for r in AuditRecord.objects.filter(kind="proposal", verdict="deny")]


def test_email_proposal_recorded_with_provenance(gw, token, live_run, dests):
    run = live_run[0]
    RunDecision.objects.create(
        decision_id="dc_1",
        run=run,
        grant_slug="web-read",
        result_class=1,
        untrusted=True,
        method="GET",
        url="https://news.example.com:443/x",
    )
    Run.objects.filter(pk=run.pk).update(untrusted=True)
    status, body = gw.propose(token, EMAIL)
    assert status == 201, body
    assert body["status"] == "pending" and body["kind"] == "email" and body["destination"] == "mail"
    proposal = Proposal.objects.get(pk=body["id"])
    assert proposal.run_id == run.pk and proposal.worker_id == run.worker_id
    assert proposal.untrusted is True and proposal.taint == DataClass.PRIVATE
    assert (
        proposal.payload == {**EMAIL["payload"], "attachments": []} and proposal.rationale == EMAIL["reason"]
    )
    assert proposal.seen[0]["grant"] == "web-read" and proposal.seen[0]["untrusted"] is True
    record = AuditRecord.objects.get(kind="proposal", verdict="ask")
    assert record.run_id_ref == run.pk and body["id"] in record.body
    assert gw.status(token, body["id"]) == (200, {**body})


@pytest.mark.parametrize(
    ("payload", "status", "reason"),
    [
        ({**EMAIL, "run": 99}, 422, "invalid_proposal"),
        ({**EMAIL, "worker": "beta"}, 422, "invalid_proposal"),
        (mail(subject="hi\r\nBcc: all@evil.example"), 422, "invalid_proposal"),
        (mail(to=["stranger@evil.example"]), 403, "recipient_not_allowed"),
        ({**EMAIL, "destination": "nowhere"}, 404, "no_destination"),
        ({**EMAIL, "destination": "hooks"}, 422, "wrong_kind"),
        (
            mail(attachments=[{"filename": "a.bin", "content_b64": base64.b64encode(b"x" * 2048).decode()}]),
            422,
            "invalid_proposal",
        ),
        ({**HOOK, "payload": "not an object"}, 422, "invalid_proposal"),
        (
            push("main"),
            403,
            "branch_not_allowed",
        ),
        (
            push("feature"),
            403,
            "branch_not_allowed",
        ),
        ({"kind": "launch_missiles"}, 422, "invalid_proposal"),
        ({**EMAIL, "payload": {**EMAIL["payload"], "bcc": ["x@example.com"]}}, 422, "invalid_proposal"),
        ({**EMAIL, "reason": "x" * 2001}, 422, "invalid_proposal"),
        (
            {"kind": "identity_edit", "destination": "mail", "payload": {"identity": "x"}},
            422,
            "invalid_proposal",
        ),
        (b"{not json", 422, "invalid_proposal"),
    ],
)
def test_bad_proposals_leave_only_an_audited_rejection(gw, token, dests, settings, payload, status, reason):
    settings.ROSTER_PROPOSAL_MAX_ATTACHMENT_BYTES = 1024
    got, body = gw.propose(token, payload)
    assert (got, body["error"]) == (status, reason), body
    assert not Proposal.objects.exists()
    assert not SpendLine.objects.exists()
    assert [r["reason"] for r in _rejections()] == [reason]


def test_oversized_body_is_413(gw, token, dests, settings):
    settings.ROSTER_PROPOSAL_MAX_BYTES = 100
    got, body = gw.propose(token, mail(body="x" * 200))
    assert (got, body["error"]) == (413, "too_large")
    assert not Proposal.objects.exists()


def test_bad_token_is_407_and_audited(gw, dests):
    got, body = gw.propose("rt_not-a-real-token", EMAIL)
    assert (got, body["error"]) == (407, "bad_token")
    assert not Proposal.objects.exists() and _rejections()[0]["reason"] == "bad_token"


def test_taint_above_ceiling_refused(gw, token, live_run, dests):
    Run.objects.filter(pk=live_run[0].pk).update(taint=DataClass.SECRET)
    got, body = gw.propose(token, EMAIL)
    assert (got, body["error"]) == (403, "taint_too_high")
    assert not Proposal.objects.exists()


def test_daily_limit_and_caps_hold_a_worker(gw, token, live_run, make_destination, dests):
    make_destination(
        "mail2",
        kind="smtp",
        smtp_host="127.0.0.1",
        starttls=False,
        from_address="b@example.com",
        allowed_recipients=["@example.com"],
        daily_limit=2,
        cost_micro=500,
    )
    email = {**EMAIL, "destination": "mail2"}
    assert gw.propose(token, email)[0] == 201
    assert gw.propose(token, email)[0] == 201
    got, body = gw.propose(token, email)
    assert (got, body["error"]) == (402, "over_budget")
    assert Proposal.objects.count() == 2
    Cap.objects.create(worker=live_run[0].worker, unit="micro", window="day", limit=1200)
    got, body = gw.propose(token, {**EMAIL})  # "mail" costs nothing in micro; 1 request only
    assert got == 201
    make_destination(
        "mail3",
        kind="smtp",
        smtp_host="127.0.0.1",
        starttls=False,
        from_address="b@example.com",
        allowed_recipients=["@example.com"],
        cost_micro=500,
    )
    assert gw.propose(token, {**EMAIL, "destination": "mail3"})[0] == 402  # 1000 spent + 500 > 1200


def test_forged_identity_never_reaches_another_run(gw, token, live_run, dests):
    other = worker_create("beta")
    other_run, _other_token = run_create(other)
    run_set_status(other_run.pk, Run.Status.RUNNING)
    status, body = gw.propose(token, {**HOOK, "payload": {"run": other_run.pk, "worker": "beta"}})
    assert status == 201
    proposal = Proposal.objects.get(pk=body["id"])
    assert proposal.run_id == live_run[0].pk and proposal.worker.name == "alpha"
    # another run's token cannot see it
    _r, other_token = run_create(other)
    run_set_status(_r.pk, Run.Status.RUNNING)
    Run.objects.filter(pk=_r.pk).update(box_address="10.89.0.3")
    assert gw.status(other_token, body["id"], client="10.89.0.3")[0] == 404
    # nor can this run's token, presented from anywhere but its box
    assert gw.status(token, body["id"], client="10.89.0.3")[0] == 407
    assert gw.status(token, body["id"], client="")[0] == 407


def test_a_proposal_with_a_token_from_outside_its_box_is_refused_and_audited(gw, token, live_run, dests):
    gw_call = gw.client.post(
        "/api/gateway/proposals",
        data=json.dumps({"token": token, "client": "172.17.0.1",
                         "body_b64": base64.b64encode(json.dumps(EMAIL).encode()).decode()}),
        content_type="application/json", headers=gw.auth)
    assert gw_call.json()["status"] == 407 and gw_call.json()["body"]["error"] == "bad_token"
    assert "10.89.0.2" not in gw_call.content.decode()  # the box's address is told to nobody outside
    assert not Proposal.objects.exists()
    record = AuditRecord.objects.filter(kind="proposal").latest("id")
    refused = json.loads(record.body)["data"]
    assert refused["message"] == "token presented from 172.17.0.1, run's box is 10.89.0.2"


def test_ended_run_cannot_propose(gw, token, live_run, dests):
    run_set_status(live_run[0].pk, Run.Status.SUCCEEDED)
    assert gw.propose(token, EMAIL)[0] == 407


def test_gateway_routes_need_the_service_credential(client, token, dests):
    response = client.post(
        "/api/gateway/proposals",
        data=json.dumps({"token": token, "client": BOX_ADDRESS, "body_b64": ""}),
        content_type="application/json",
    )
    assert response.status_code == 401
    assert not Proposal.objects.exists()


def test_unknown_field_in_gateway_envelope_is_422(gw, token, dests):
    response = gw.client.post(
        "/api/gateway/proposals",
        data=json.dumps({"token": token, "client": BOX_ADDRESS, "body_b64": "", "run": 1}),
        content_type="application/json",
        headers=gw.auth,
    )
    assert response.status_code == 422


@pytest.mark.parametrize("body_b64", ["not base64!", "eyJr aW5kIjp9", "eyJraW5kIjp9_-"],
                         ids=["punctuation", "whitespace", "urlsafe-alphabet"])
def test_body_that_is_not_strict_base64_is_422_and_records_nothing(gw, token, dests, body_b64):
    response = gw.client.post(
        "/api/gateway/proposals",
        data=json.dumps({"token": token, "client": BOX_ADDRESS, "body_b64": body_b64}),
        content_type="application/json",
        headers=gw.auth,
    )
    assert response.status_code == 422
    assert "body_b64 is not valid base64" in response.content.decode()
    assert not Proposal.objects.exists()
