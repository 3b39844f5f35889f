"""Decisions counted in process where the decision API maps its answer (by verdict and bounded reason),
their latency, and the audit chain's append latency; nothing secret or unbounded in a label."""

from __future__ import annotations

import json

import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controlplane.metrics import decisions
from tests.egress.fixtures import SECRET_VALUE, decide_body

pytestmark = pytest.mark.django_db


def value(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def snapshot(*samples: tuple[str, dict]) -> list[float]:
    return [value(name, **labels) for name, labels in samples]


DECISIONS = "roster_decisions_total"
SAMPLES = (
    (DECISIONS, {"verdict": "allow", "reason": "granted"}),
    (DECISIONS, {"verdict": "deny", "reason": "no_grant"}),
    (DECISIONS, {"verdict": "deny", "reason": "bad_token"}),
    (DECISIONS, {"verdict": "ask", "reason": "approval_required"}),
    ("roster_decide_seconds_count", {}),
)


def test_each_answered_decision_is_counted_once_by_verdict_and_reason(gateway, token, make_grant):
    make_grant(slug="chat")
    before = snapshot(*SAMPLES)
    appends_before = value("roster_audit_append_seconds_count")
    for _ in range(3):
        assert gateway.decide(decide_body(token))["verdict"] == "allow"
    for _ in range(2):
        assert gateway.decide(decide_body(token, host="api.elsewhere.example"))["reason"] == "no_grant"
    assert gateway.decide(decide_body("rt_not_a_token"))["reason"] == "bad_token"
    after = snapshot(*SAMPLES)
    assert [a - b for a, b in zip(after, before, strict=True)] == [3, 2, 1, 0, 6]
    # Every decision appends at least its decision record to the chain, each one timed.
    assert value("roster_audit_append_seconds_count") - appends_before >= 6


def test_an_ask_is_counted_as_ask(gateway, token, make_grant):
    make_grant(mode="ask")
    before = value(DECISIONS, verdict="ask", reason="approval_required")
    assert gateway.decide(decide_body(token))["verdict"] == "ask"
    assert value(DECISIONS, verdict="ask", reason="approval_required") - before == 1


@pytest.mark.parametrize(("verdict", "reason", "label"), [
    ("allow", None, "granted"), ("ask", None, "approval_required"), ("deny", "over_budget", "over_budget"),
    ("deny", "something_new", "other"), ("deny", "https://evil.example/?k=secret", "other"),
    ("deny", None, "other"),
])
def test_reason_labels_are_bounded(verdict, reason, label):
    assert decisions.reason_label(verdict, reason) == label


def test_no_label_carries_a_token_host_path_or_secret(gateway, token, make_grant, secret):
    make_grant(secret=secret, inject_header="Authorization", inject_format="Bearer {secret}")
    gateway.decide(decide_body(token, path="/v1/chat/completions/very-private-path"))
    gateway.decide(decide_body(token, host="private-host.example"))
    text = generate_latest(REGISTRY).decode()
    for needle in (SECRET_VALUE, token, "private-host.example", "very-private-path", "dc_"):
        assert needle not in text
    allowed_labels = {"verdict", "reason", "le"}
    for family in text_string_to_metric_families(text):
        if family.name.startswith(("roster_decisions", "roster_decide", "roster_audit")):
            for sample in family.samples:
                assert set(sample.labels) <= allowed_labels, sample


@pytest.mark.django_db(transaction=True)
def test_a_decision_over_asgi_counts_once(token, make_grant):
    from tests.egress.asgi_call import asgi_call

    make_grant()
    body = json.dumps(decide_body(token)).encode()
    before = value(DECISIONS, verdict="allow", reason="granted")
    assert asgi_call("/api/gateway/decide", body)[0] == 200
    assert value(DECISIONS, verdict="allow", reason="granted") - before == 1
