"""Model calls on the ledger: the worst case reserved before the call, a legible 402 when it would cross a
token or money cap, the reported usage settled (cached input and reasoning priced right), unreadable
usage settled at the worst case and flagged, and the rest released."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.db.models import Sum
from django.utils import timezone

from controlplane.audit.models import AuditRecord
from controlplane.ledger import caps
from controlplane.ledger.model_spend import price_for
from controlplane.ledger.models import Cap, ModelPrice, SpendLine
from controlplane.ledger.services import reserve, settle
from controlplane.ledger.types import ModelCallFacts, OverBudget, Reservation, TokenUsage

pytestmark = pytest.mark.django_db


def _price(pattern="gpt-4o*", inp=2_500_000, cached=1_250_000, out=10_000_000, ceiling=16_384):
    return ModelPrice.objects.create(pattern=pattern, input_micro_per_million=inp,
                                     cached_input_micro_per_million=cached, output_micro_per_million=out,
                                     max_output_tokens=ceiling)


def _call(model="gpt-4o-mini", max_out=100, choices=1, estimate=400):
    return ModelCallFacts(api="chat", model=model, stream=True, max_output_tokens=max_out, choices=choices,
                          input_estimate=estimate)


def _reserve(worker, run, decision_id, call, cost_micro=0):
    return reserve(worker=worker, run=run, grant_slug="openai", decision_id=decision_id,
                   cost_micro=cost_micro, origin="human", model_call=call)


def _total(unit, **filters):
    return SpendLine.objects.filter(unit=unit, **filters).aggregate(s=Sum("amount"))["s"] or 0


def _data(kind):
    return [json.loads(r.body)["data"] for r in AuditRecord.objects.filter(kind=kind).order_by("seq")]


def _spend_records(decision_id):
    return [d for d in _data("spend") if d.get("decision_id") == decision_id]


def test_price_lookup_exact_then_longest_glob():
    _price("gpt-4o*")
    longer = _price("gpt-4o-mini*")
    exact = _price("gpt-4o")
    assert price_for("gpt-4o-mini-2024-07-18") == longer
    assert price_for("gpt-4o") == exact
    assert price_for("claude-3") is None


def test_worst_case_reserved_then_truth_settled_with_cached_and_reasoning_priced(worker, run):
    _price()
    got = _reserve(worker, run, "dc_m1", _call(max_out=300, estimate=1600), cost_micro=7)
    # worst case: 1600 input tokens at the input price + 300 output at the output price
    assert isinstance(got, Reservation) and got.tokens == 1900 and got.micro == 7 + 4000 + 3000
    assert (_total("tokens"), _total("micro")) == (1900, 7007)
    settle("dc_m1", 10, 20, TokenUsage(known=True, model="gpt-4o-mini-2024-07-18", input=1200,
                                       cached_input=1024, output=300, reasoning=200))
    # 176 uncached at 2.5 + 1024 cached at 1.25 + 300 output (reasoning included) at 10 per million
    assert (_total("tokens"), _total("micro")) == (1500, 7 + 440 + 1280 + 3000)
    settled = _spend_records("dc_m1")[-1]["model"]
    assert settled["flagged"] is False and settled["reasoning"] == 200 and settled["micro"] == 4720


def test_micro_rounds_up_never_down(worker, run):
    _price(inp=1, cached=1, out=1)
    _reserve(worker, run, "dc_r", _call(max_out=10, estimate=10))
    settle("dc_r", 0, 0, TokenUsage(known=True, input=1, output=1))
    assert _total("micro") == 1 and _total("tokens") == 2


@pytest.mark.parametrize("usage", [None, TokenUsage(known=False, model="gpt-4o", problem="cut off")])
def test_unknown_usage_settles_at_worst_case_and_is_flagged(worker, run, usage):
    _price()
    _reserve(worker, run, "dc_u", _call(max_out=100, estimate=400))
    settle("dc_u", 10, 0, usage)
    assert (_total("tokens"), _total("micro")) == (500, 2000)
    settled = _spend_records("dc_u")[-1]["model"]
    assert settled["flagged"] is True and settled["usage"] == "worst_case"
    assert settled["problem"] == ("cut off" if usage else "no usage reported")


def test_token_cap_refuses_legibly_with_spent_and_reserved(worker, run):
    _price()
    Cap.objects.create(worker=worker, unit="tokens", window="day", limit=1000)
    assert isinstance(_reserve(worker, run, "dc_a", _call(max_out=200, estimate=400)), Reservation)
    over = _reserve(worker, run, "dc_b", _call(max_out=200, estimate=400))
    assert isinstance(over, OverBudget)
    # The remainder is only held by dc_a in flight, not spent: the call may wait for it to settle.
    assert over.as_dict() == {"scope": "worker:alpha", "unit": "tokens", "window": "day", "limit": 1000,
                              "spent": 600, "reserved": 600, "in_flight": 1, "held": 600}
    assert over.waitable and over.message.startswith("held by 1 call in flight: ")
    assert "spent 0 of 1000 tokens" in over.message and "reserve up to 600" in over.message
    assert "over budget" not in over.message
    assert not SpendLine.objects.filter(decision_id="dc_b").exists()
    # the first call used less than its worst case: the difference is released and the next call fits
    settle("dc_a", 0, 0, TokenUsage(known=True, input=100, output=50))
    assert isinstance(_reserve(worker, run, "dc_c", _call(max_out=200, estimate=400)), Reservation)
    assert _total("tokens") == 150 + 600


def test_choices_multiply_the_worst_case_and_the_ceiling_stands_in_for_no_ask(worker, run):
    _price(ceiling=1000)
    assert _reserve(worker, run, "dc_n", _call(max_out=50, choices=4, estimate=10)).tokens == 10 + 200
    assert _reserve(worker, run, "dc_c", _call(max_out=None, estimate=10)).tokens == 10 + 1000
    assert _reserve(worker, run, "dc_x", _call(max_out=10**9, estimate=10)).tokens == 10 + 10**9


def test_money_cap_without_a_price_refuses(worker, run):
    Cap.objects.create(worker=None, unit="micro", window="month", limit=10**9)
    over = _reserve(worker, run, "dc_np", _call(model="mystery-model"))
    assert isinstance(over, OverBudget) and over.scope == "org" and "no price is configured" in over.message


def test_token_cap_without_any_output_bound_refuses(worker, run):
    Cap.objects.create(worker=worker, unit="tokens", window="all", limit=10**9)
    over = _reserve(worker, run, "dc_nb", _call(model="mystery-model", max_out=None))
    assert isinstance(over, OverBudget) and "no max_tokens" in over.message


def test_calls_that_are_not_model_calls_ignore_token_caps(worker, run):
    Cap.objects.create(worker=worker, unit="tokens", window="day", limit=0)
    assert isinstance(_reserve(worker, run, "dc_plain", None), Reservation)


def test_release_and_settle_fall_in_the_reservation_window(worker, run):
    _price()
    _reserve(worker, run, "dc_w", _call())
    reserved_at = SpendLine.objects.get(decision_id="dc_w", unit="tokens", kind="reserve").created_at
    settle("dc_w", 0, 0, TokenUsage(known=True, input=10, output=10))
    dates = set(SpendLine.objects.filter(decision_id="dc_w", unit__in=["tokens", "micro"])
                .values_list("created_at", flat=True))
    assert dates == {reserved_at} and timezone.now() - reserved_at < dt.timedelta(minutes=5)


def test_price_changes_are_audited_like_grants(admin_user):
    price = caps.price_save(ModelPrice(pattern="o3*", input_micro_per_million=2_000_000,
                                       cached_input_micro_per_million=500_000,
                                       output_micro_per_million=8_000_000, max_output_tokens=100_000),
                            admin_user)
    price.output_micro_per_million = 9_000_000
    caps.price_save(price, admin_user)
    caps.price_delete(price, admin_user)
    events = [(d["action"], (d["after"] or d["before"])["output_micro_per_million"])
              for d in _data("grant_change")]
    assert events == [("created", 8_000_000), ("updated", 9_000_000), ("deleted", 9_000_000)]


def test_a_worst_case_above_the_whole_remaining_cap_is_refused_not_held(worker, run):
    """Calls in flight hold part of the cap, but this call would not fit even if they used nothing: it
    must not wait, and its refusal says so."""
    _price()
    Cap.objects.create(worker=worker, unit="tokens", window="day", limit=1000)
    assert isinstance(_reserve(worker, run, "dc_a", _call(max_out=200, estimate=100)), Reservation)
    settle("dc_a", 0, 0, TokenUsage(known=True, input=100, output=200))  # 300 spent for good
    assert isinstance(_reserve(worker, run, "dc_b", _call(max_out=100, estimate=100)), Reservation)
    over = _reserve(worker, run, "dc_c", _call(max_out=700, estimate=100))  # 800 > 1000 - 300
    assert isinstance(over, OverBudget) and not over.waitable
    assert (over.spent, over.in_flight, over.held, over.reserved) == (500, 1, 200, 800)
    assert over.message.startswith("over budget: ") and "more than the 700 that would remain" in over.message


def test_a_settled_call_holds_nothing(worker, run):
    _price()
    Cap.objects.create(worker=worker, unit="tokens", window="day", limit=500)
    assert isinstance(_reserve(worker, run, "dc_a", _call(max_out=200, estimate=100)), Reservation)
    settle("dc_a", 0, 0, None)  # no usage: settled at its worst case, 300 spent
    over = _reserve(worker, run, "dc_b", _call(max_out=200, estimate=100))
    assert isinstance(over, OverBudget) and (over.in_flight, over.held, over.waitable) == (0, 0, False)
