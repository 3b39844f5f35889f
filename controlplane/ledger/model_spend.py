"""Model calls on the ledger: price a call's worst case before it is forwarded (input estimate plus its
maximum output at the output price), and settle the usage the gateway read from the response, releasing
the rest. Usage that could not be read settles at the reserved worst case and is flagged.

Release and settle lines carry the reservation's time, so a call's spend always falls in the window it
was reserved in (a call crossing midnight never leaves a negative day behind)."""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass

from controlplane.ledger import sql
from controlplane.ledger.models import ModelCallReservation, ModelPrice, SpendLine, Unit
from controlplane.ledger.types import ModelCallFacts, TokenUsage

MILLION = 1_000_000


@dataclass(frozen=True)
class ModelPlan:
    """What a model call reserves. `unbounded` names why its worst case cannot be bounded (then any
    token or money cap refuses it)."""

    model: str
    price: ModelPrice | None
    input_estimate: int
    max_output: int
    tokens: int
    micro: int
    unbounded: str = ""


def price_for(model: str) -> ModelPrice | None:
    """An exact pattern wins; otherwise the longest glob that matches (ties: the lowest id). Read in plain
    SQL (every metered model call asks); the price returned holds the row's fields, for reading only."""
    best = None
    pattern_at = sql.PRICE_COLUMNS.index("pattern")
    for row in sql.price_rows():
        pattern = row[pattern_at]
        if pattern == model:
            best = row
            break
        longer = best is None or len(pattern) > len(best[pattern_at])
        if longer and fnmatch.fnmatchcase(model, pattern):
            best = row
    return None if best is None else ModelPrice(**dict(zip(sql.PRICE_COLUMNS, best, strict=True)))


@dataclass(frozen=True)
class Rates:
    """Micro-currency per million tokens, by what the tokens are."""

    input: int
    cached_input: int
    cache_write: int
    cache_write_1h: int
    output: int

    @property
    def worst_input(self) -> int:
        """What an input token can cost at most: a reservation prices its whole input estimate at this,
        since what the provider will read from or write to its cache is not known before the call."""
        return max(self.input, self.cached_input, self.cache_write, self.cache_write_1h)


def _micro(usage: TokenUsage, rates: Rates) -> int:
    written_5m = usage.cache_write - usage.cache_write_1h
    plain = usage.input - usage.cached_input - usage.cache_write
    total = (plain * rates.input + usage.cached_input * rates.cached_input + written_5m * rates.cache_write
             + usage.cache_write_1h * rates.cache_write_1h + usage.output * rates.output)
    return math.ceil(total / MILLION)  # never round a bill down


def _consistent(usage: TokenUsage) -> bool:
    return (usage.cached_input + usage.cache_write <= usage.input
            and usage.cache_write_1h <= usage.cache_write and usage.reasoning <= usage.output)


def plan(call: ModelCallFacts) -> ModelPlan:
    price = price_for(call.model)
    # What the call asked for, else the model's configured ceiling. Never the lower of the two: a ceiling
    # set too low would let a call that asked for more overshoot its reservation.
    max_output = (call.max_output_tokens or (price.max_output_tokens if price else 0)) * call.choices
    unbounded = ""
    if price is None:
        unbounded = f"no price is configured for model {call.model[:80]!r}"
    micro = 0
    if price is not None:
        worst_in = _rates(price).worst_input
        micro = math.ceil((call.input_estimate * worst_in + max_output * price.output_micro_per_million)
                          / MILLION)
    return ModelPlan(model=call.model, price=price, input_estimate=call.input_estimate, max_output=max_output,
                     tokens=call.input_estimate + max_output, micro=micro, unbounded=unbounded)


def record_reservation(decision_id: str, plan_: ModelPlan, created_at) -> None:
    price = plan_.price
    rates = _rates(price) if price else Rates(0, 0, 0, 0, 0)  # the rates this call settles at
    sql.reservation_insert([
        decision_id, plan_.model[:200], price.pattern if price else "", rates.input, rates.cached_input,
        rates.output, rates.cache_write, rates.cache_write_1h, plan_.input_estimate, plan_.max_output,
        plan_.tokens, plan_.micro, sql.adapted_time(created_at)])


def _rates(prices: ModelPrice | ModelCallReservation) -> Rates:
    """A price's rates, or those a reservation was made at. A blank cache-write rate is the input rate, a
    blank 1-hour one the cache-write rate (a price row changed by hand; a reservation made before cache
    writes were priced apart)."""
    written = prices.cache_write_micro_per_million
    written = prices.input_micro_per_million if written is None else written
    written_1h = prices.cache_write_1h_micro_per_million
    written_1h = written if written_1h is None else written_1h
    return Rates(input=prices.input_micro_per_million, cached_input=prices.cached_input_micro_per_million,
                 cache_write=written, cache_write_1h=written_1h, output=prices.output_micro_per_million)


def settle_model_call(decision_id: str, usage: TokenUsage | None, *, worker_id: int, run_id: int | None,
                      grant_slug: str) -> dict | None:
    """Release the call's reservation and settle what it used; returns the audit details (None when the
    decision was not a model call). Call inside the settle's transaction."""
    row = sql.reservation_row(decision_id)
    if row is None:
        return None
    # The row's fields, for reading only (plain SQL: every settle of a model call asks).
    reservation = ModelCallReservation(**dict(zip(sql.RESERVATION_COLUMNS, row, strict=True)))
    flagged = usage is None or not usage.known or not _consistent(usage)
    if flagged:
        tokens, micro = reservation.tokens, reservation.micro
        if usage is None:
            problem = "no usage reported"
        else:
            problem = usage.problem if not usage.known else "inconsistent counts (a part exceeds its whole)"
    else:
        tokens = usage.input + usage.output
        micro = _micro(usage, _rates(reservation))
        problem = usage.problem
    when = sql.adapted_time(reservation.created_at)
    common = [worker_id, run_id, grant_slug, decision_id]
    lines = [[*common, SpendLine.Kind.RELEASE, Unit.TOKENS, -reservation.tokens, when],
             [*common, SpendLine.Kind.SETTLE, Unit.TOKENS, tokens, when]]
    if reservation.micro or micro:
        lines += [[*common, SpendLine.Kind.RELEASE, Unit.MICRO, -reservation.micro, when],
                  [*common, SpendLine.Kind.SETTLE, Unit.MICRO, micro, when]]
    sql.lines_insert(lines)
    details = {"model": reservation.model, "price": reservation.price_pattern or None,
               "reserved_tokens": reservation.tokens, "reserved_micro": reservation.micro,
               "tokens": tokens, "micro": micro, "usage": "worst_case" if flagged else "reported",
               "flagged": flagged}
    if usage is not None:
        details.update({"reported_model": usage.model[:200], "input": usage.input,
                        "cached_input": usage.cached_input, "output": usage.output,
                        "reasoning": usage.reasoning, "cache_write": usage.cache_write,
                        "cache_write_1h": usage.cache_write_1h})
    if problem:
        details["problem"] = problem[:200]
    return details
