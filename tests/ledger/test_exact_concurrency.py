"""A cap sized to admit exactly N model calls one at a time admits exactly N of 10 × N at concurrency 32
and 64, when a caller refused only because calls in flight hold the remainder (OverBudget.waitable) tries
again once they settle, as the decision API does (controlplane.egress.budget_wait), and never overshoots.
Refused callers are refused for good (spent), never for a remainder still held. On SQLite here and on
PostgreSQL through tests/integration/test_on_postgresql.py."""

from __future__ import annotations

import time

import pytest
from django.db import transaction
from django.db.models import Sum

from controlplane.fleet.models import Worker
from controlplane.ledger.models import Cap, ModelPrice, SpendLine
from controlplane.ledger.services import reserve, settle
from controlplane.ledger.types import ModelCallFacts, OverBudget, TokenUsage
from tests.ledger.hammer import concurrently

pytestmark = pytest.mark.django_db(transaction=True)
N = 10
FACTS = ModelCallFacts(api="chat", model="gpt-test", stream=True, max_output_tokens=100, choices=1,
                       input_estimate=50)  # worst case 150 tokens, 5 + 40 = 45 micro
USED = TokenUsage(known=True, model="gpt-test", input=25, output=40)  # 65 tokens, 2.5 + 16 -> 19 micro
SETTLED = {"tokens": 65, "micro": 19}
WORST = {"tokens": 150, "micro": 45}


def _call(worker: Worker, decision_id: str) -> str:
    """Reserve (trying again while only held), stream a little, settle: "allowed" or "refused"."""
    while True:
        with transaction.atomic():
            result = reserve(worker=worker, run=None, grant_slug="g", decision_id=decision_id, cost_micro=0,
                             origin="proactive", model_call=FACTS)
        if not isinstance(result, OverBudget):
            break
        if not result.waitable:
            assert result.in_flight == 0 or result.spent - result.held + result.reserved > result.limit
            return "refused"
        time.sleep(0.005)
    time.sleep(0.01)
    settle(decision_id, 1, 1, USED)
    return "allowed"


@pytest.mark.parametrize("unit", ["tokens", "micro"])
@pytest.mark.parametrize("concurrency", [32, 64])
def test_exactly_n_of_10n_concurrent_model_calls(unit, concurrency, capsys):
    ModelPrice.objects.create(pattern="gpt-test", input_micro_per_million=100_000,
                              cached_input_micro_per_million=50_000, output_micro_per_million=400_000,
                              max_output_tokens=4096)
    worker = Worker.objects.create(name=f"exact-{unit}-{concurrency}")
    cap = (N - 1) * SETTLED[unit] + WORST[unit]  # one at a time: exactly N fit
    Cap.objects.create(worker=worker, unit=unit, window="day", limit=cap)
    results = concurrently(lambda i: _call(worker, f"x-{unit}-{concurrency}-{i}"), range(10 * N),
                           threads=concurrency)
    spent = SpendLine.objects.filter(unit=unit).aggregate(s=Sum("amount"))["s"]
    assert results.count("allowed") == N and spent == N * SETTLED[unit] <= cap
    with capsys.disabled():
        print(f"\n[ledger exactly N, {unit}, c{concurrency}] {results.count('allowed')} of {10 * N} "
              f"admitted (cap {cap} sized for {N}), {spent} spent")
