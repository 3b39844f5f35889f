"""Token caps hold exactly under concurrency: 64 streamed model calls at a time, each reserving its worst
case before it is forwarded, streaming with nothing held, then settling what it used. The tokens (and
money) on the ledger never pass the cap, at any instant and at the end. Runs on SQLite here and on
PostgreSQL through tests/integration/test_on_postgresql.py. Also: token spend survives a restart."""

from __future__ import annotations

import json
import threading

import pytest
from django.db.models import Sum

from controlplane.audit.verify import verify_database
from controlplane.fleet.models import Worker
from controlplane.ledger.models import Cap, ModelPrice, SpendLine
from controlplane.ledger.selectors import cap_statuses
from tests.ledger import children
from tests.ledger.hammer import concurrently, model_call

pytestmark = pytest.mark.django_db(transaction=True)
CONCURRENCY = 64
TOKEN_CAP = 6_000  # worst case 50 + 100 = 150 per call: 40 in flight at most, 64 asking at once
MICRO_CAP = 1_500  # worst case 1 (grant) + 5 + 40 = 46 per call; settled 1 + 19 = 20


def _price() -> None:
    ModelPrice.objects.create(pattern="gpt-test", input_micro_per_million=100_000,
                              cached_input_micro_per_million=50_000, output_micro_per_million=400_000,
                              max_output_tokens=4096)


def _sum(unit: str) -> int:
    return SpendLine.objects.filter(unit=unit).aggregate(s=Sum("amount"))["s"] or 0


def test_zero_overshoot_at_a_token_cap_under_64_concurrent_streamed_calls(capsys):
    worker = Worker.objects.create(name="streamer")
    _price()
    Cap.objects.create(worker=worker, unit="tokens", window="day", limit=TOKEN_CAP)
    Cap.objects.create(worker=None, unit="micro", window="month", limit=MICRO_CAP)
    peaks = {"tokens": 0, "micro": 0}
    stop = threading.Event()

    def watch():  # the ledger's totals, sampled while the calls run: never above the cap either
        from django.db import connection
        try:
            while not stop.is_set():
                for unit in peaks:
                    peaks[unit] = max(peaks[unit], _sum(unit))
        finally:
            connection.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        allowed = sum(concurrently(lambda i: model_call("streamer", f"m-{i}", stream_seconds=0.02),
                                   range(CONCURRENCY * 4), threads=CONCURRENCY))
    finally:
        stop.set()
        watcher.join()
    tokens, micro = _sum("tokens"), _sum("micro")
    # each settled call used 25 input + 40 output tokens: 65 tokens, 2.5 + 16 = 18.5 -> 19 micro (+1 grant)
    assert tokens == allowed * 65 and micro == allowed * 20
    assert tokens <= TOKEN_CAP and micro <= MICRO_CAP and peaks["tokens"] <= TOKEN_CAP
    assert peaks["micro"] <= MICRO_CAP and allowed >= 32  # at least every call that fit at worst case
    assert verify_database().ok
    with capsys.disabled():
        print(f"\n[token cap] {allowed} of {CONCURRENCY * 4} calls at concurrency {CONCURRENCY}: "
              f"{tokens} tokens settled, peak {peaks['tokens']} of cap {TOKEN_CAP}, overshoot "
              f"{max(0, peaks['tokens'] - TOKEN_CAP)}; "
              f"{micro} micro, peak {peaks['micro']} of cap {MICRO_CAP}")


def test_token_spend_survives_a_restart_and_is_still_enforced():
    worker = Worker.objects.create(name="restart-tokens")
    _price()
    Cap.objects.create(worker=worker, unit="tokens", window="all", limit=10 * 65 + 149)
    allowed = sum(model_call("restart-tokens", f"r-{i}") for i in range(10))
    assert allowed == 10
    here = [s.as_dict() for s in cap_statuses()]
    assert [(s["unit"], s["spent"]) for s in here] == [("tokens", 650)]
    assert children.run("totals") == here  # a fresh process replays the ledger to the same totals
    # ... and enforces them: 149 tokens left, a call's worst case is 150
    assert children.run("model", "--worker", "restart-tokens", "--count", "2", "--prefix", "after") == {
        "allowed": 0, "denied": 2}
    assert json.dumps(here)
