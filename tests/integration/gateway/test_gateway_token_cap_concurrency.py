"""Zero overshoot at a token cap through the whole path: 64 boxes' streamed chat completions at once
through a real mitmdump and the decision API process, each reserving its worst case before it is
forwarded, streaming, and settling what the upstream reported. The tokens on the ledger never pass the
cap, sampled while the calls run and at the end; every refusal is a legible 402. Runs on the test
database whatever it is: SQLite here, PostgreSQL through tests/integration/test_on_postgresql.py."""

from __future__ import annotations

import hashlib
import json
import ssl
import threading
import time

import httpx
import pytest
from django.db import connection
from django.db.models import Count, Sum

from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_database
from controlplane.fleet.models import Run, RunDecision
from controlplane.fleet.services import run_create, run_set_status, worker_create
from controlplane.ledger.models import Cap, ModelPrice, SpendLine
from controlplane.policy.models import Grant
from tests.conftest import GATEWAY_SERVICE_TOKEN
from tests.integration.gateway.model_upstream import ModelUpstream
from tests.ledger import children
from tests.support import procs
from tests.support.gateway import gateway_process

pytestmark = [pytest.mark.integration, pytest.mark.slow]
CONCURRENCY = 64
CALLS_PER_BOX = 2
MAX_TOKENS = 200


def _chain_is_one_line() -> int:
    """The audit chain every decision API process appended to: no two records on one head (a fork), seq
    without a gap, every hash verified. Returns the forks (0) for the summary line."""
    forks = AuditRecord.objects.values("prev_hash").annotate(n=Count("id")).filter(n__gt=1).count()
    seqs = list(AuditRecord.objects.order_by("seq").values_list("seq", flat=True))
    assert forks == 0 and seqs == list(range(1, len(seqs) + 1)) and verify_database().ok
    return forks


def _tokens() -> int:
    return SpendLine.objects.filter(unit="tokens").aggregate(s=Sum("amount"))["s"] or 0


def _call(gateway, token: str, url: str, doc: dict, results: list) -> None:
    context = ssl.create_default_context(cafile=str(gateway.ca_cert_path))
    proxy = gateway.proxy_url_with(token)
    with httpx.Client(proxy=proxy, timeout=60, trust_env=False, verify=context) as client:
        for _ in range(CALLS_PER_BOX):
            with client.stream("POST", url, json=doc) as response:
                body = response.read()
                results.append((response.status_code, body))


@pytest.mark.parametrize("processes", [1, 2], ids=["1-process", "2-processes"])
def test_zero_overshoot_at_a_token_cap_under_64_concurrent_streamed_calls(transactional_db, redis_url,
                                                                          tmp_path, capsys, processes):
    model = ModelUpstream()
    model.usage = {"prompt": 20, "completion": 30, "cached": 0, "reasoning": 0}
    model.pause = 0.05
    sqlite = connection.vendor == "sqlite"
    database = connection.settings_dict["NAME"] if sqlite else children.test_database_url()
    env = procs.control_plane_env(database, redis_url, {
        "ROSTER_GATEWAY_TOKEN_SHA256": hashlib.sha256(GATEWAY_SERVICE_TOKEN.encode()).hexdigest()})
    worker = worker_create(f"cap-{time.monotonic_ns() % 10**9}")
    run, token = run_create(worker)
    run_set_status(run.pk, Run.Status.RUNNING)
    # This process is the run's "box": it dials the gateway over loopback, and a token is accepted only
    # from its box's address.
    Run.objects.filter(pk=run.pk).update(box_address="127.0.0.1")
    Grant.objects.create(slug="model", host="127.0.0.1", port=model.port, schemes=["http"], methods=["POST"])
    ModelPrice.objects.create(pattern="gpt-*", input_micro_per_million=1_000_000,
                              cached_input_micro_per_million=500_000, output_micro_per_million=4_000_000,
                              max_output_tokens=4096)
    doc = {"model": "gpt-4o-mini", "stream": True, "max_tokens": MAX_TOKENS,
           "messages": [{"role": "user", "content": "hi"}]}
    worst = len(httpx.Request("POST", "http://x", json=doc).content) + MAX_TOKENS
    cap = 20 * worst  # 20 calls fit at their worst case at once; 128 ask
    Cap.objects.create(worker=worker, unit="tokens", window="day", limit=cap)
    results: list = []
    peak = {"tokens": 0}
    stop = threading.Event()

    def watch():
        try:
            while not stop.is_set():
                peak["tokens"] = max(peak["tokens"], _tokens())
                time.sleep(0.01)
        finally:
            connection.close()

    try:
        with procs.decision_api_server(env, tmp_path, processes=processes) as url, gateway_process(
                url, GATEWAY_SERVICE_TOKEN, tmp_path, allow_loopback_upstreams=True) as gw:
            procs.wait_for_http(url + "/api/gateway/health", timeout=30)
            watcher = threading.Thread(target=watch)
            watcher.start()
            boxes = [threading.Thread(target=_call, args=(gw, token, model.url("/v1/chat/completions"), doc,
                                                          results)) for _ in range(CONCURRENCY)]
            started = time.monotonic()
            for box in boxes:
                box.start()
            for box in boxes:
                box.join()
            elapsed = time.monotonic() - started
            allowed = sum(1 for status, _ in results if status == 200)
            deadline = time.monotonic() + 30  # outcomes settle in the background
            while RunDecision.objects.filter(run=run, outcome_at__isnull=True).exists():
                assert time.monotonic() < deadline, (
                    "outcomes were never settled", RunDecision.objects.filter(run=run).count(),
                    RunDecision.objects.filter(run=run, outcome_at__isnull=True).count(), allowed,
                    list(SpendLine.objects.values_list("kind", "unit").annotate(n=Sum("amount"))))
                time.sleep(0.1)
            stop.set()
            watcher.join()
    finally:
        stop.set()
        model.close()
    statuses = sorted({status for status, _ in results})
    refused = [body for status, body in results if status == 402]
    tokens = _tokens()
    # 503: the control plane did not answer within the gateway's decide timeout (this machine is shared
    # and small); the floor is closed, so that is a refusal too. 502: the loopback model stand-in dropped a
    # connection under the burst (admitted calls now arrive together, once held budget frees).
    unanswered = sum(1 for status, _ in results if status == 503)
    assert len(results) == CONCURRENCY * CALLS_PER_BOX and set(statuses) <= {200, 402, 502, 503}
    # Settled: 20 input + 30 output for each answered call; a forwarded call whose upstream dropped it (502)
    # reported no usage, so it is charged its worst case (controlplane.ledger.model_spend), never nothing.
    dropped = sum(1 for status, _ in results if status == 502)
    assert tokens == allowed * 50 + dropped * worst and allowed >= 10
    assert peak["tokens"] <= cap and tokens <= cap
    budgets = [json.loads(body)["budget"] for body in refused]
    assert all(b["unit"] == "tokens" and b["limit"] == cap and b["reserved"] == worst for b in budgets)
    assert all(b["spent"] + b["reserved"] > cap for b in budgets)
    forks = _chain_is_one_line()
    with capsys.disabled():
        print(f"\n[gateway token cap, {connection.vendor}, {processes} process(es)] {allowed} of "
              f"{len(results)} streamed calls allowed at concurrency {CONCURRENCY} in {elapsed:.1f}s; "
              "ledger peak "
              f"{peak['tokens']} of cap {cap} tokens (overshoot {max(0, peak['tokens'] - cap)}), "
              f"{tokens} settled; {len(refused)} legible 402s, {unanswered} 503s (decide timed out); "
              f"{forks} chain forks")


# Exactly N (issue 22): a cap sized so that one call at a time admits exactly N (each settles at what it
# used, 20 input + 30 output tokens; the next needs room for its whole worst case) admits exactly N of
# 10 × N concurrent calls, for a token, a money and a request cap, plain and streamed: a call refused
# only because calls in flight hold the remainder waits for them to settle (controlplane.egress
# .budget_wait) instead of being refused at once, and never overshoots.
N = 10
USED_TOKENS, USED_MICRO = 50, 20 * 1 + 30 * 4  # at 1 micro per input token, 4 per output token


def _sized_cap(unit: str, doc: dict) -> tuple[int, int]:
    """(cap, one call's reservation in that unit) such that exactly N calls fit one at a time."""
    estimate = len(httpx.Request("POST", "http://x", json=doc).content)
    if unit == "tokens":
        worst = estimate + MAX_TOKENS
        return (N - 1) * USED_TOKENS + worst, worst
    if unit == "micro":
        worst = estimate * 1 + MAX_TOKENS * 4
        return (N - 1) * USED_MICRO + worst, worst
    return N, 1


def _fire(gw, token: str, url: str, doc: dict, calls: int, concurrency: int) -> list:
    results: list = []
    lock = threading.Lock()
    remaining = [calls]
    start = threading.Barrier(concurrency)

    def box():
        context = ssl.create_default_context(cafile=str(gw.ca_cert_path))
        with httpx.Client(proxy=gw.proxy_url_with(token), timeout=120, trust_env=False,
                          verify=context) as client:
            start.wait()
            while True:
                with lock:
                    if not remaining[0]:
                        return
                    remaining[0] -= 1
                with client.stream("POST", url, json=doc) as response:
                    results.append((response.status_code, response.read()))

    threads = [threading.Thread(target=box) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _settled(run) -> None:
    deadline = time.monotonic() + 60  # outcomes settle in the background
    while RunDecision.objects.filter(run=run, outcome_at__isnull=True).exists():
        assert time.monotonic() < deadline, "outcomes were never settled"
        time.sleep(0.1)


def _spent(worker, unit: str) -> int:
    return SpendLine.objects.filter(worker=worker, unit=unit).aggregate(s=Sum("amount"))["s"] or 0


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("concurrency", [32, 64], ids=["c32", "c64"])
def test_exactly_n_of_10n_concurrent_calls_are_admitted_at_each_kind_of_cap(transactional_db, redis_url,
                                                                          tmp_path, capsys, concurrency,
                                                                          stream):
    model = ModelUpstream()
    model.usage = {"prompt": 20, "completion": 30, "cached": 0, "reasoning": 0}
    model.pause = 0.02
    sqlite = connection.vendor == "sqlite"
    database = connection.settings_dict["NAME"] if sqlite else children.test_database_url()
    env = procs.control_plane_env(database, redis_url, {
        "ROSTER_GATEWAY_TOKEN_SHA256": hashlib.sha256(GATEWAY_SERVICE_TOKEN.encode()).hexdigest()})
    Grant.objects.create(slug="model", host="127.0.0.1", port=model.port, schemes=["http"], methods=["POST"])
    ModelPrice.objects.create(pattern="gpt-*", input_micro_per_million=1_000_000,
                              cached_input_micro_per_million=500_000, output_micro_per_million=4_000_000,
                              max_output_tokens=4096)
    doc = {"model": "gpt-4o-mini", "stream": stream, "max_tokens": MAX_TOKENS,
           "messages": [{"role": "user", "content": "hi"}]}
    measured = {}
    try:
        with procs.decision_api_server(env, tmp_path) as url, gateway_process(
                url, GATEWAY_SERVICE_TOKEN, tmp_path, allow_loopback_upstreams=True) as gw:
            procs.wait_for_http(url + "/api/gateway/health", timeout=30)
            for unit in ("tokens", "micro", "requests"):
                worker = worker_create(f"exact-{unit}-{time.monotonic_ns() % 10**9}")
                run, token = run_create(worker)
                run_set_status(run.pk, Run.Status.RUNNING)
                Run.objects.filter(pk=run.pk).update(box_address="127.0.0.1")  # this process is its box
                cap, worst = _sized_cap(unit, doc)
                Cap.objects.create(worker=worker, unit=unit, window="day", limit=cap)
                started = time.monotonic()
                results = _fire(gw, token, model.url("/v1/chat/completions"), doc, 10 * N, concurrency)
                _settled(run)
                admitted = sum(1 for status, _ in results if status == 200)
                refused = [json.loads(body) for status, body in results if status == 402]
                measured[unit] = (admitted, time.monotonic() - started)
                assert len(results) == 10 * N and len(refused) == 10 * N - N, (unit, admitted, sorted(
                    {status for status, _ in results}))
                assert admitted == N, (unit, admitted)
                spent = _spent(worker, unit)
                assert spent == {"tokens": N * USED_TOKENS, "micro": N * USED_MICRO, "requests": N}[unit]
                assert spent <= cap
                # Every refusal is the cap, spent for good: none was refused while calls in flight held it.
                assert all(r["budget"]["unit"] == unit and r["budget"]["reserved"] == worst
                           and r["budget"]["in_flight"] == 0 for r in refused), refused[:2]
                assert not any("held by" in r["message"] for r in refused)
    finally:
        model.close()
    forks = _chain_is_one_line()
    with capsys.disabled():
        print(f"\n[exactly N, {connection.vendor}, c{concurrency}, {'streamed' if stream else 'plain'}, "
              f"{procs.DECISION_PROCESSES} processes] "
              + "; ".join(f"{unit}: {a} of {10 * N} admitted (cap sized for {N}) in {s:.1f}s"
                          for unit, (a, s) in measured.items()) + f"; {forks} chain forks")
