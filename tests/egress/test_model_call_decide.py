"""/decide with a model call's facts: its worst case is reserved with the allow (tokens and money), a
token cap answers a legible 402, the facts survive an approval hold, and /outcome settles the usage.
Bad facts are a 422 with nothing decided."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from controlplane.approvals.services import approval_decide
from controlplane.core.roles import APPROVERS
from controlplane.fleet.models import RunDecision
from controlplane.ledger.models import Cap, ModelCallReservation, ModelPrice, SpendLine
from tests.egress.fixtures import decide_body

pytestmark = pytest.mark.django_db
CALL = {"api": "chat", "model": "gpt-4o", "stream": True, "max_output_tokens": 100, "choices": 2,
        "input_estimate": 300}


@pytest.fixture(autouse=True)
def price(db):
    return ModelPrice.objects.create(pattern="gpt-4o*", input_micro_per_million=2_000_000,
                                     cached_input_micro_per_million=1_000_000,
                                     output_micro_per_million=8_000_000, max_output_tokens=4096)


def test_model_call_reserves_its_worst_case_and_settles_usage(gateway, token, make_grant):
    make_grant()
    answer = gateway.decide(decide_body(token, model_call=CALL))
    assert answer["verdict"] == "allow"
    reservation = ModelCallReservation.objects.get(decision_id=answer["decision_id"])
    assert (reservation.tokens, reservation.micro) == (300 + 200, 600 + 1600)
    usage = {"known": True, "model": "gpt-4o-2024-08-06", "input": 250, "cached_input": 200, "output": 150,
             "reasoning": 0, "problem": ""}
    response = gateway.post("/api/gateway/outcome", {"decision_id": answer["decision_id"], "status": 200,
                                                     "request_bytes": 1, "response_bytes": 2, "error": "",
                                                     "scrubbed": 0, "usage": usage})
    assert response.status_code == 200
    lines = SpendLine.objects.filter(decision_id=answer["decision_id"])
    assert sum(line.amount for line in lines if line.unit == "tokens") == 400
    assert sum(line.amount for line in lines if line.unit == "micro") == 100 + 200 + 1200


def test_token_cap_refuses_with_the_cap_and_the_reservation(gateway, token, make_grant, live_run):
    make_grant()
    Cap.objects.create(worker=live_run[0].worker, unit="tokens", window="month", limit=499)
    answer = gateway.decide(decide_body(token, model_call=CALL))
    assert (answer["verdict"], answer["reason"], answer["status"]) == ("deny", "over_budget", 402)
    assert answer["budget"] == {"scope": f"worker:{live_run[0].worker.name}", "unit": "tokens",
                                "window": "month", "limit": 499, "spent": 0, "reserved": 500, "in_flight": 0,
                                "held": 0}
    assert "would reserve up to 500" in answer["message"]
    assert not RunDecision.objects.filter(decision_id=answer["decision_id"]).exists()


def test_model_call_facts_survive_an_approval(gateway, token, make_grant):
    make_grant(mode="ask")
    ask = gateway.decide(decide_body(token, model_call=CALL))
    user = User.objects.create_user("ann", password="pw-123456789")
    user.groups.add(Group.objects.get(name=APPROVERS))
    approval_decide(ask["approval_id"], user, True, "web")
    answer = gateway.post(f"/api/gateway/approvals/{ask['approval_id']}/wait", {"timeout_seconds": 0}).json()
    decision_id = answer["decision"]["decision_id"]
    assert ModelCallReservation.objects.get(decision_id=decision_id).tokens == 500


@pytest.mark.parametrize("bad", [
    {**CALL, "api": "embeddings"}, {**CALL, "choices": 0}, {**CALL, "choices": 129},
    {**CALL, "max_output_tokens": 0}, {**CALL, "input_estimate": -1}, {**CALL, "stream": "yes"},
    {**CALL, "extra": 1}, {**CALL, "input_estimate": 1.5},
])
def test_bad_model_call_facts_are_refused(gateway, token, make_grant, bad):
    make_grant()
    response = gateway.post("/api/gateway/decide", decide_body(token, model_call=bad))
    assert response.status_code == 422
    assert not ModelCallReservation.objects.exists() and not SpendLine.objects.exists()


def test_a_gemini_call_reserves_and_settles_like_the_others(gateway, token, make_grant):
    # The gateway reads Gemini's model from the path and its bound from generationConfig (docs/wire.md).
    make_grant()
    ModelPrice.objects.create(pattern="gemini-2.5-flash", input_micro_per_million=1_000_000,
                              cached_input_micro_per_million=250_000, output_micro_per_million=4_000_000,
                              max_output_tokens=65536)
    call = {"api": "gemini", "model": "gemini-2.5-flash", "stream": True, "max_output_tokens": 1000,
            "choices": 1, "input_estimate": 500}
    answer = gateway.decide(decide_body(token, model_call=call))
    assert answer["verdict"] == "allow"
    assert ModelCallReservation.objects.get(decision_id=answer["decision_id"]).tokens == 1500
    usage = {"known": True, "model": "gemini-2.5-flash", "input": 400, "cached_input": 0, "output": 300,
             "reasoning": 200, "problem": ""}
    response = gateway.post("/api/gateway/outcome", {"decision_id": answer["decision_id"], "status": 200,
                                                     "request_bytes": 1, "response_bytes": 2, "error": "",
                                                     "scrubbed": 0, "usage": usage})
    assert response.status_code == 200
    lines = SpendLine.objects.filter(decision_id=answer["decision_id"])
    assert sum(line.amount for line in lines if line.unit == "tokens") == 700
    assert sum(line.amount for line in lines if line.unit == "micro") == 400 + 1200
