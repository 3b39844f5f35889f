"""A call refused only because calls in flight hold the cap's remainder waits for them to settle
(controlplane.egress.budget_wait), then is decided on what they really used; past the wait it is refused
"held by N calls in flight", with one audit record for the whole wait. A call that would not fit even if
they used nothing is refused at once, and so is one whose wait is turned off."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from controlplane.audit.models import AuditRecord
from controlplane.egress.budget_wait import SETTLED, decide_waiting
from controlplane.egress.decide import decide
from controlplane.egress.gateway_calls import egress_request
from controlplane.egress.outcomes import outcome_report
from controlplane.egress.schemas import DecideIn
from controlplane.ledger.models import Cap, ModelPrice, SpendLine
from controlplane.ledger.types import TokenUsage
from tests.egress.fixtures import decide_body

pytestmark = pytest.mark.django_db
CALL = {"api": "chat", "model": "gpt-4o", "stream": True, "max_output_tokens": 100, "choices": 1,
        "input_estimate": 100}  # worst case 200 tokens


@pytest.fixture(autouse=True)
def price(db):
    return ModelPrice.objects.create(pattern="gpt-4o*", input_micro_per_million=1_000_000,
                                     cached_input_micro_per_million=1_000_000,
                                     output_micro_per_million=1_000_000, max_output_tokens=4096)


@pytest.fixture
def request_(token, make_grant, live_run):
    make_grant()
    Cap.objects.create(worker=live_run[0].worker, unit="tokens", window="day", limit=300)
    return egress_request(DecideIn.model_validate(decide_body(token, model_call=CALL)))


def _decisions() -> int:
    return AuditRecord.objects.filter(kind="decision").count()


def _waiting(req, settle_after: float | None = None, first: str | None = None):
    """Decide `req` with waiting (as the decision API does); if `settle_after`, settle `first` (30 tokens
    used of its 200) that long after the wait started, as an outcome arriving from the gateway would."""
    tries = []

    async def once(may_wait):
        tries.append(may_wait)
        return await sync_to_async(decide)(req, may_wait)

    async def settle_later():
        await asyncio.sleep(settle_after)
        await sync_to_async(outcome_report)(first, 200, 1, 1, "", 0,
                                            TokenUsage(known=True, model="gpt-4o", input=10, output=20))
        SETTLED.notify()

    async def both():
        if settle_after is None:
            return await decide_waiting(once)
        answer, _ = await asyncio.gather(decide_waiting(once), settle_later())
        return answer
    return async_to_sync(both)(), tries


def test_a_call_held_by_one_in_flight_waits_for_it_and_is_allowed(request_, settings):
    settings.ROSTER_BUDGET_WAIT_MS, settings.ROSTER_BUDGET_WAIT_POLL_MS = 20_000, 10_000
    first = decide(request_)
    assert first.decision.verdict == "allow"
    before = _decisions()
    started = time.monotonic()
    answer, tries = _waiting(request_, settle_after=0.3, first=first.decision_id)
    assert answer.decision.verdict == "allow" and not answer.budget_held
    assert time.monotonic() - started < 10  # woken by the settle, not by the poll
    assert tries[0] is True and len(tries) >= 2
    assert _decisions() == before + 1  # the tries that came back held wrote nothing
    tokens = sum(SpendLine.objects.filter(unit="tokens").values_list("amount", flat=True))
    assert tokens == 30 + 200  # the first settled, the second holds its worst case


def test_past_the_wait_the_refusal_says_held_by_n_calls_in_flight(request_, settings):
    settings.ROSTER_BUDGET_WAIT_MS, settings.ROSTER_BUDGET_WAIT_POLL_MS = 300, 50
    assert decide(request_).decision.verdict == "allow"
    before = _decisions()
    answer, tries = _waiting(request_)
    assert (answer.decision.verdict, answer.decision.reason) == ("deny", "over_budget")
    assert answer.decision.message.startswith("held by 1 call in flight: ")
    assert answer.budget["in_flight"] == 1 and answer.budget["held"] == 200
    assert not answer.budget_held and tries[-1] is False and len(tries) >= 3
    assert _decisions() == before + 1  # one record for the whole wait: the refusal
    assert not SpendLine.objects.filter(decision_id=answer.decision_id).exists()


def test_no_wait_when_turned_off(request_, settings):
    settings.ROSTER_BUDGET_WAIT_MS = 0
    assert decide(request_).decision.verdict == "allow"
    answer, tries = _waiting(request_)
    assert tries == [False] and answer.decision.message.startswith("held by 1 call in flight")


def test_a_call_that_would_not_fit_even_if_they_used_nothing_is_refused_at_once(token, make_grant, live_run,
                                                                              settings):
    settings.ROSTER_BUDGET_WAIT_MS = 20_000
    make_grant()
    Cap.objects.create(worker=live_run[0].worker, unit="tokens", window="day", limit=300)
    assert decide(egress_request(DecideIn.model_validate(decide_body(token, model_call=CALL)))
                  ).decision.verdict == "allow"
    big = egress_request(DecideIn.model_validate(decide_body(token, model_call={**CALL,
                                                                               "max_output_tokens": 250})))
    started = time.monotonic()
    answer, tries = _waiting(big)
    assert tries == [True] and time.monotonic() - started < 5
    assert answer.decision.message.startswith("over budget: ") and "even if they used nothing" in (
        answer.decision.message)

