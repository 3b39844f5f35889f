"""Issue 27.4: an `ask` for a worker already over budget is refused first (over_budget, the cap named),
and no approval is opened: a person's yes would have been refused by the cap anyway. Within budget, or
with the remainder only held by calls in flight, it still asks."""

from __future__ import annotations

import json

import pytest

from controlplane.approvals.models import Approval
from controlplane.audit.models import AuditRecord
from controlplane.ledger.models import Cap
from tests.egress.fixtures import decide_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def ask_grant(make_grant):
    return make_grant(mode="ask", cost_per_call=50)


def test_an_ask_over_budget_is_refused_and_nobody_is_asked(gateway, token, ask_grant, worker):
    Cap.objects.create(worker=worker, unit="micro", window="day", limit=40)
    answer = gateway.decide(decide_body(token))
    assert answer["verdict"] == "deny" and answer["reason"] == "over_budget", answer
    assert "not put to an approver" in answer["message"] and "worker:alpha" in answer["message"]
    assert not answer.get("approval_id")
    assert not Approval.objects.exists()
    record = json.loads(AuditRecord.objects.filter(kind="decision").order_by("-seq").first().body)["data"]
    assert record["budget"]["limit"] == 40 and record["approval"] is None


def test_an_org_cap_used_up_refuses_too(gateway, token, ask_grant):
    Cap.objects.create(worker=None, unit="requests", window="day", limit=0)
    assert gateway.decide(decide_body(token))["reason"] == "over_budget"
    assert not Approval.objects.exists()


def test_within_budget_it_asks(gateway, token, ask_grant, worker):
    Cap.objects.create(worker=worker, unit="micro", window="day", limit=500)
    answer = gateway.decide(decide_body(token))
    assert answer["verdict"] == "ask" and Approval.objects.count() == 1
