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
from django.db.models import Sum

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


def test_zero_overshoot_at_a_token_cap_under_64_concurrent_streamed_calls(transactional_db, redis_url,
                                                                          tmp_path, capsys):
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
        with procs.decision_api_server(env, tmp_path) as url, gateway_process(
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
    # and small); the floor is closed, so that is a refusal too.
    unanswered = sum(1 for status, _ in results if status == 503)
    assert len(results) == CONCURRENCY * CALLS_PER_BOX and set(statuses) <= {200, 402, 503}
    assert tokens == allowed * 50 and allowed >= 10  # settled: 20 input + 30 output each
    assert peak["tokens"] <= cap and tokens <= cap
    budgets = [json.loads(body)["budget"] for body in refused]
    assert all(b["unit"] == "tokens" and b["limit"] == cap and b["reserved"] == worst for b in budgets)
    assert all(b["spent"] + b["reserved"] > cap for b in budgets)
    with capsys.disabled():
        print(f"\n[gateway token cap, {connection.vendor}] {allowed} of {len(results)} "
              f"streamed calls allowed at concurrency {CONCURRENCY} in {elapsed:.1f}s; ledger peak "
              f"{peak['tokens']} of cap {cap} tokens (overshoot {max(0, peak['tokens'] - cap)}), "
              f"{tokens} settled; {len(refused)} legible 402s, {unanswered} 503s (decide timed out)")
