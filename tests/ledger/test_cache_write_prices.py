"""Cache writes priced apart (docs/metering.md): a write to the provider's prompt cache settles at the
cache-write rate, a write to the 1-hour cache at its own; the reservation prices its whole input at the
highest input-side rate, so what a call settles never exceeds what it reserved; blank rates fall back
(both blank: cache writes are priced as input; one alone is refused); counts whose parts exceed their whole
settle at the worst case, flagged."""

from __future__ import annotations

import json
import math

import pytest
from django.core.exceptions import ValidationError
from django.db.models import Sum
from hypothesis import given
from hypothesis import strategies as st

from controlplane.audit.models import AuditRecord
from controlplane.ledger import caps
from controlplane.ledger import sql as ledger_sql
from controlplane.ledger.model_spend import MILLION, Rates, _micro
from controlplane.ledger.models import ModelCallReservation, ModelPrice, SpendLine
from controlplane.ledger.services import reserve, settle
from controlplane.ledger.types import ModelCallFacts, Reservation, TokenUsage

# Claude Sonnet's list prices, in micro-dollars per million tokens.
SONNET = {"input_micro_per_million": 3_000_000, "cached_input_micro_per_million": 300_000,
          "output_micro_per_million": 15_000_000, "max_output_tokens": 64_000}


def _price(**rates) -> ModelPrice:
    return ModelPrice.objects.create(pattern="claude-*", **{**SONNET, **rates})


def _reserve(worker, run, decision_id, estimate=10_000, max_out=100):
    call = ModelCallFacts(api="messages", model="claude-sonnet-4", stream=False, max_output_tokens=max_out,
                          choices=1, input_estimate=estimate)
    return reserve(worker=worker, run=run, grant_slug="anthropic", decision_id=decision_id, cost_micro=0,
                   origin="human", model_call=call)


def _settled_micro(decision_id) -> int:
    return SpendLine.objects.filter(decision_id=decision_id, unit="micro", kind="settle").aggregate(
        s=Sum("amount"))["s"]


def _settle_record(decision_id) -> dict:
    for record in AuditRecord.objects.filter(kind="spend").order_by("-seq"):
        data = json.loads(record.body)["data"]
        if data.get("decision_id") == decision_id and data.get("op") == "settle":
            return data["model"]
    raise AssertionError("no settle record")


USAGE = TokenUsage(known=True, model="claude-sonnet-4", input=9000, cached_input=2000, output=100,
                   cache_write=5000, cache_write_1h=1000)


@pytest.mark.django_db
def test_cache_writes_settle_at_their_own_rates(worker, run):
    _price(cache_write_micro_per_million=3_750_000, cache_write_1h_micro_per_million=6_000_000)
    got = _reserve(worker, run, "dc_cw")
    # The whole input estimate at the highest input-side rate (the 1-hour write), the output at its own.
    assert isinstance(got, Reservation) and got.micro == 10_000 * 6 + 100 * 15
    settle("dc_cw", 10, 20, USAGE)
    # 2000 plain at 3, 2000 cached at 0.3, 4000 written for 5 minutes at 3.75, 1000 for an hour at 6,
    # 100 output at 15 (micro-dollars per token)
    assert _settled_micro("dc_cw") == 6000 + 600 + 15_000 + 6000 + 1500
    model = _settle_record("dc_cw")
    assert (model["cache_write"], model["cache_write_1h"], model["flagged"]) == (5000, 1000, False)


@pytest.mark.django_db
def test_blank_rates_price_cache_writes_as_input(worker, run):
    _price()
    _reserve(worker, run, "dc_blank")
    settle("dc_blank", 10, 20, USAGE)
    assert _settled_micro("dc_blank") == (2000 + 5000) * 3 + 2000 * 0.3 + 100 * 15


@pytest.mark.django_db
@pytest.mark.parametrize("one", ["cache_write_micro_per_million", "cache_write_1h_micro_per_million"])
def test_one_cache_write_price_alone_is_refused_and_changes_nothing(admin_user, one):
    # The 5-minute price alone would settle 1-hour writes at it: Anthropic bills those 60 % higher.
    with pytest.raises(ValidationError, match="set both cache-write prices"):
        caps.price_save(ModelPrice(pattern="claude-*", **{one: 3_750_000}, **SONNET), admin_user)
    assert not ModelPrice.objects.exists() and not AuditRecord.objects.filter(kind="grant_change").exists()


@pytest.mark.django_db
def test_a_row_with_one_price_set_outside_the_admin_prices_the_other_write_at_it(worker, run):
    # Refused by the admin and price_save; a row changed by hand still settles within its reservation.
    _price()
    ModelPrice.objects.update(cache_write_micro_per_million=3_750_000)
    reserved = _reserve(worker, run, "dc_5m_only")
    settle("dc_5m_only", 10, 20, USAGE)
    assert _settled_micro("dc_5m_only") == 2000 * 3 + 2000 * 0.3 + 5000 * 3.75 + 100 * 15 <= reserved.micro


@pytest.mark.django_db
def test_a_price_edited_after_the_reservation_does_not_change_the_settlement(worker, run):
    _price(cache_write_micro_per_million=3_750_000, cache_write_1h_micro_per_million=6_000_000)
    _reserve(worker, run, "dc_snap")
    ModelPrice.objects.update(cache_write_micro_per_million=99_000_000, cache_write_1h_micro_per_million=0)
    settle("dc_snap", 10, 20, USAGE)
    assert _settled_micro("dc_snap") == 6000 + 600 + 15_000 + 6000 + 1500


@pytest.mark.django_db
def test_a_reservation_from_before_cache_write_prices_settles_writes_at_its_input_rate(worker, run,
                                                                                      monkeypatch):
    _price(cache_write_micro_per_million=3_750_000)
    # Reservations are append-only: one made before the migration has no cache-write rates (NULL).
    insert = ledger_sql.reservation_insert
    blank = {ledger_sql.RESERVATION_COLUMNS.index(name)
             for name in ("cache_write_micro_per_million", "cache_write_1h_micro_per_million")}
    monkeypatch.setattr(ledger_sql, "reservation_insert", lambda values: insert(
        [None if i in blank else value for i, value in enumerate(values)]))
    _reserve(worker, run, "dc_old")
    old = ModelCallReservation.objects.get(decision_id="dc_old")
    assert old.cache_write_micro_per_million is None and old.cache_write_1h_micro_per_million is None
    settle("dc_old", 10, 20, USAGE)
    assert _settled_micro("dc_old") == (2000 + 5000) * 3 + 2000 * 0.3 + 100 * 15


@pytest.mark.django_db
@pytest.mark.parametrize("usage", [
    TokenUsage(known=True, input=100, cached_input=60, cache_write=50, output=1),  # reads + writes > input
    TokenUsage(known=True, input=100, cache_write=10, cache_write_1h=11, output=1),  # 1-hour > all writes
    TokenUsage(known=True, input=100, output=1, reasoning=2),  # reasoning > output
], ids=["parts-over-input", "1h-over-writes", "reasoning-over-output"])
def test_counts_whose_parts_exceed_their_whole_settle_the_worst_case_flagged(worker, run, usage):
    _price()
    reserved = _reserve(worker, run, "dc_bad")
    settle("dc_bad", 10, 20, usage)
    model = _settle_record("dc_bad")
    assert model["flagged"] is True and "inconsistent" in model["problem"]
    assert _settled_micro("dc_bad") == reserved.micro


@pytest.mark.django_db
def test_cache_write_prices_are_audited_with_the_price(admin_user):
    price = caps.price_save(ModelPrice(pattern="claude-*", cache_write_micro_per_million=3_750_000,
                                       cache_write_1h_micro_per_million=5_000_000, **SONNET), admin_user)
    price.cache_write_1h_micro_per_million = 6_000_000
    caps.price_save(price, admin_user)
    changes = [json.loads(r.body)["data"] for r in AuditRecord.objects.filter(kind="grant_change")]
    assert [(c["after"]["cache_write_micro_per_million"], c["after"]["cache_write_1h_micro_per_million"])
            for c in changes] == [(3_750_000, 5_000_000), (3_750_000, 6_000_000)]
    assert changes[1]["changed"] == ["cache_write_1h_micro_per_million"]


rates = st.integers(min_value=0, max_value=100_000_000)


@given(st.integers(0, 10**7), st.integers(0, 10**6), st.data(),
       st.builds(Rates, input=rates, cached_input=rates, cache_write=rates, cache_write_1h=rates,
                 output=rates))
def test_a_settlement_within_the_estimate_never_exceeds_the_reservation(estimate, max_out, data, price):
    # Whatever the split of the input between plain, cache reads and cache writes of either lifetime.
    total_in = data.draw(st.integers(0, estimate))
    cached = data.draw(st.integers(0, total_in))
    written = data.draw(st.integers(0, total_in - cached))
    written_1h = data.draw(st.integers(0, written))
    output = data.draw(st.integers(0, max_out))
    usage = TokenUsage(known=True, input=total_in, cached_input=cached, cache_write=written,
                       cache_write_1h=written_1h, output=output)
    reserved = math.ceil((estimate * price.worst_input + max_out * price.output) / MILLION)
    assert _micro(usage, price) <= reserved
