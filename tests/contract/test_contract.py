"""The API accepts exactly the fixture requests and answers exactly the fixture responses."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_decide
from controlplane.audit.models import AuditRecord
from controlplane.core.roles import APPROVERS
from controlplane.core.taint import DataClass
from controlplane.fleet.models import RunDecision
from controlplane.fleet.services import run_raise_taint
from controlplane.ledger.models import Cap
from tests.contract import contract

pytestmark = pytest.mark.django_db


def _openai(make_grant, secret, **fields):
    return make_grant(secret=secret, inject_header="authorization", inject_format="Bearer {secret}", **fields)


SCENARIOS = {
    "decide_allow": lambda c: _openai(c.make_grant, c.secret),
    "decide_allow_trace": lambda c: c.make_grant(trace=True),
    "decide_allow_model_call": lambda c: c.make_grant(),
    "decide_allow_mcp": lambda c: c.make_grant(slug="mcp-search", host="mcp.example.com",
                                               mcp_tools=["search"]),
    "decide_allow_tunnel": lambda c: c.make_grant(slug="pinned", host="pinned.example.com", port=8443,
                                                  schemes=[], tunnel=True),
    "decide_ask": lambda c: c.make_grant(mode="ask"),
    "decide_deny_no_grant": lambda c: c.make_grant(),
    "decide_deny_model_host": lambda c: c.make_grant(slug="anthropic", host="api.anthropic.com",
                                                     paths=["/v1/messages"], wire="anthropic-messages"),
    "decide_deny_tripwire": lambda c: (c.secret, c.make_grant(slug="example", host="example.com")),
    "decide_deny_tripwire_body": lambda c: (c.secret, c.make_grant(slug="example", host="example.com")),
    "decide_deny_grant_expired": lambda c: c.make_grant(expires_at=timezone.now() - timedelta(days=1)),
    "decide_deny_taint_too_high": lambda c: (c.make_grant(),
                                             run_raise_taint(c.run.pk, DataClass.SECRET, untrusted=False)),
    "decide_deny_denied_by_grant": lambda c: (c.make_grant(), c.make_grant(slug="no-chat", mode="deny")),
    "decide_deny_over_budget": lambda c: (c.make_grant(), Cap.objects.create(
        worker=c.run.worker, unit="requests", window="day", limit=1), c.gateway.decide(c.body)),
    "decide_deny_bad_token": lambda c: c.make_grant(),
    "decide_deny_bad_token_address": lambda c: c.make_grant(),
    "decide_deny_policy_error": lambda c: (c.make_grant(), c.make_grant(slug="broken", host="[bad")),
}


class Context:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_every_decide_fixture_has_a_scenario():
    assert set(contract.names("decide_")) == set(SCENARIOS)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_decide_fixture(name, gateway, live_run, secret, make_grant):
    run, token = live_run
    fixture = contract.load(name, **{contract.TOKEN: token, contract.SENTINEL: secret.sentinel})
    ctx = Context(gateway=gateway, run=run, secret=secret, make_grant=make_grant, body=fixture["request"])
    SCENARIOS[name](ctx)
    response = gateway.post("/api/gateway/decide", fixture["request"])
    assert response.status_code == fixture["status_code"]
    assert contract.mismatches(fixture["response"], response.json(), frozenset(fixture["variable"])) == []


@pytest.fixture
def approver(db):
    user = User.objects.create_user("ann", password="pw-123456789")
    user.groups.add(Group.objects.get(name=APPROVERS))
    return user


@pytest.mark.parametrize("name", contract.names("wait_"))
def test_wait_fixture(name, gateway, live_run, secret, make_grant, approver):
    run, token = live_run
    _openai(make_grant, secret, mode="ask")
    ask = gateway.decide(contract.load("decide_ask", **{contract.TOKEN: token})["request"])
    approval_id = ask["approval_id"]
    fixture = contract.load(name, **{contract.APPROVAL_ID: approval_id, contract.SENTINEL: secret.sentinel})
    if name == "wait_approved":
        approval_decide(approval_id, approver, True, "web")
    elif name == "wait_refused":
        approval_decide(approval_id, approver, False, "web")
    elif name == "wait_refused_comment":
        approval_decide(approval_id, approver, False, "web", comment="not during the release freeze")
    elif name == "wait_expired":
        Approval.objects.filter(pk=approval_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    path = fixture["endpoint"].split(" ", 1)[1]
    request = dict(fixture["request"], timeout_seconds=0)  # same shape; no need to sit out the timeout
    response = gateway.post(path, request)
    assert response.status_code == fixture["status_code"]
    assert contract.mismatches(fixture["response"], response.json(), frozenset(fixture["variable"])) == []


def _allowed(gateway, token, make_grant, **grant_fields):
    make_grant(**grant_fields)
    return gateway.decide(contract.load("decide_allow_trace", **{contract.TOKEN: token})["request"])


OTHER_FIXTURES = ["outcome", "outcome_usage", "outcomes", "outcome_unknown", "outcome_settled", "trace",
                  "abandon", "health", "unknown_field", "sentinels"]


@pytest.mark.parametrize("name", OTHER_FIXTURES)
def test_other_fixtures(name, gateway, token, make_grant, secret):
    substitutions = {contract.TOKEN: token}
    if name in ("outcome", "outcome_usage", "outcomes", "outcome_settled", "trace"):
        substitutions[contract.DECISION_ID] = _allowed(gateway, token, make_grant, trace=True)["decision_id"]
    if name == "abandon":
        make_grant(mode="ask")
        ask = gateway.decide(contract.load("decide_ask", **{contract.TOKEN: token})["request"])
        substitutions[contract.APPROVAL_ID] = ask["approval_id"]
    if name == "sentinels":
        substitutions[contract.SENTINEL] = secret.sentinel
    fixture = contract.load(name, **substitutions)
    method, path = fixture["endpoint"].split(" ", 1)
    if name == "outcome_settled":
        assert gateway.post(path, fixture["request"]).status_code == 200
    response = gateway.get(path) if method == "GET" else gateway.post(path, fixture["request"])
    assert response.status_code == fixture["status_code"], response.content
    if fixture["response"] is not None:
        assert contract.mismatches(fixture["response"], response.json(), frozenset(fixture["variable"])) == []


def test_outcome_scrubbed_fixture_settles_and_audits_a_tripwire(gateway, live_run, secret, make_grant):
    run, token = live_run
    _openai(make_grant, secret)
    allow = gateway.decide(contract.load("decide_allow", **{contract.TOKEN: token,
                                                            contract.SENTINEL: secret.sentinel})["request"])
    fixture = contract.load("outcome_scrubbed", **{contract.DECISION_ID: allow["decision_id"]})
    assert fixture["request"]["scrubbed"] > 0
    response = gateway.post(fixture["endpoint"].split(" ", 1)[1], fixture["request"])
    assert response.status_code == fixture["status_code"]
    assert contract.mismatches(fixture["response"], response.json(), frozenset(fixture["variable"])) == []
    [record] = AuditRecord.objects.filter(kind="tripwire", run_id_ref=run.pk)
    assert f'"secret":"{secret.name}"' in record.body
    assert f'"scrubbed":{fixture["request"]["scrubbed"]}' in record.body
    assert "real-openai-key" not in record.body


def test_outcome_response_sha256_fixture_is_stored_on_the_decision_and_its_settle(gateway, live_run,
                                                                                  make_grant):
    run, token = live_run
    allow = _allowed(gateway, token, make_grant)
    fixture = contract.load("outcome_response_sha256", **{contract.DECISION_ID: allow["decision_id"]})
    digest = fixture["request"]["response_sha256"]
    response = gateway.post(fixture["endpoint"].split(" ", 1)[1], fixture["request"])
    assert response.status_code == fixture["status_code"], response.content
    assert contract.mismatches(fixture["response"], response.json(), frozenset(fixture["variable"])) == []
    assert RunDecision.objects.get(decision_id=allow["decision_id"]).response_sha256 == digest
    [settled] = [r for r in AuditRecord.objects.filter(kind="spend", run_id_ref=run.pk)
                 if '"op":"settle"' in r.body]
    assert f'"response_sha256":"{digest}"' in settled.body


@pytest.mark.parametrize("digest", ["", "ABC", "0" * 63, "g" * 64, "0" * 65, 7])
def test_a_malformed_response_sha256_is_refused(gateway, live_run, make_grant, digest):
    _run, token = live_run
    allow = _allowed(gateway, token, make_grant)
    fixture = contract.load("outcome_response_sha256", **{contract.DECISION_ID: allow["decision_id"]})
    fixture["request"]["response_sha256"] = digest
    assert gateway.post("/api/gateway/outcome", fixture["request"]).status_code == 422
    assert RunDecision.objects.get(decision_id=allow["decision_id"]).outcome_at is None


def test_an_outcome_without_response_sha256_still_settles(gateway, live_run, make_grant):
    """An older gateway sends no digest: the outcome settles and the decision's digest stays empty."""
    _run, token = live_run
    allow = _allowed(gateway, token, make_grant)
    fixture = contract.load("outcome", **{contract.DECISION_ID: allow["decision_id"]})
    assert "response_sha256" not in fixture["request"]
    assert gateway.post("/api/gateway/outcome", fixture["request"]).status_code == 200
    decision = RunDecision.objects.get(decision_id=allow["decision_id"])
    assert decision.outcome_at is not None and decision.response_sha256 == ""


def test_every_fixture_is_exercised():
    exercised = (set(SCENARIOS) | set(contract.names("wait_")) | set(OTHER_FIXTURES)
                 | {"outcome_scrubbed", "outcome_response_sha256"})
    assert set(contract.names()) == exercised


def test_fixture_files_are_well_formed():
    for name in contract.names():
        doc = json.loads((contract.HERE / f"{name}.json").read_text())
        assert set(doc) == {"endpoint", "description", "request", "status_code", "response", "variable"}, name
        assert not any(isinstance(v, float) for v in _leaves(doc)), f"{name}: floats are not on the wire"


def _leaves(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    else:
        yield value
