"""A model call's usage and cost on the record: the run timeline (reserve and settle lines, what was read,
flagged worst cases, the run's token total), the overview's token cap meter and the CSV export."""

from __future__ import annotations

import csv
import io
import json

from django.test import Client
from django.urls import reverse

from controlplane.ledger.models import Cap, ModelPrice
from controlplane.ledger.services import reserve, settle
from controlplane.ledger.types import ModelCallFacts, TokenUsage
from tests.web.conftest import PASSWORD

CALL = ModelCallFacts(api="chat", model="gpt-4o", stream=True, max_output_tokens=500, choices=1,
                      input_estimate=1500)


def _login(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def _spend(worker, run):
    ModelPrice.objects.create(pattern="gpt-4o*", input_micro_per_million=2_500_000,
                              cached_input_micro_per_million=1_250_000, output_micro_per_million=10_000_000,
                              max_output_tokens=16_384)
    Cap.objects.create(worker=worker, unit="tokens", window="day", limit=4000)
    for decision_id in ("dc_read", "dc_cut"):
        reserve(worker=worker, run=run, grant_slug="openai", decision_id=decision_id, cost_micro=0,
                origin="human", model_call=CALL)
    settle("dc_read", 10, 10, TokenUsage(known=True, model="gpt-4o-2024-08-06", input=1200, cached_input=1024,
                                         output=300, reasoning=200))
    settle("dc_cut", 10, 10, TokenUsage(known=False, model="gpt-4o", problem="cut off"))


def test_timeline_shows_model_usage_and_flags_worst_cases(approver, worker, run):
    _spend(worker, run)
    html = _login(approver).get(reverse("web:run", args=[run.pk])).content.decode()
    assert "worst case 2000 tokens reserved" in html
    assert "1200 input (1024 cached), 300 output (200 reasoning)" in html and "1500 tokens" in html
    assert "usage unknown (cut off): settled at the worst case, flagged" in html
    assert '<dd id="total-tokens">3500</dd>' in html
    assert '<dd id="total-micro">13470</dd>' in html  # 4720 read + 8750 worst case


def test_overview_has_a_token_cap_meter(approver, worker, run):
    _spend(worker, run)
    html = _login(approver).get(reverse("web:overview")).content.decode()
    assert f"worker:{worker.name} tokens per day: 87% used" in html


def test_csv_export_carries_usage_and_the_flag(auditor, worker, run):
    _spend(worker, run)
    response = _login(auditor).get(reverse("web:audit-export"), {"kind": "spend"})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    settles = [json.loads(r["data"]) for r in rows if json.loads(r["data"]).get("op") == "settle"]
    assert [(s["model"]["tokens"], s["model"]["flagged"]) for s in settles] == [(1500, False), (2000, True)]
    assert settles[0]["model"]["micro"] == 4720 and settles[0]["model"]["reasoning"] == 200


def test_timeline_shows_cache_writes(approver, worker, run):
    ModelPrice.objects.create(pattern="claude-*", input_micro_per_million=3_000_000,
                              cached_input_micro_per_million=300_000, output_micro_per_million=15_000_000,
                              cache_write_micro_per_million=3_750_000, max_output_tokens=8192)
    call = ModelCallFacts(api="messages", model="claude-sonnet-4", stream=False, max_output_tokens=100,
                          choices=1, input_estimate=5000)
    reserve(worker=worker, run=run, grant_slug="anthropic", decision_id="dc_cw", cost_micro=0, origin="human",
            model_call=call)
    settle("dc_cw", 10, 10, TokenUsage(known=True, model="claude-sonnet-4", input=3000, cached_input=1000,
                                       cache_write=1500, output=100))
    html = _login(approver).get(reverse("web:run", args=[run.pk])).content.decode()
    assert "3000 input (1000 cached, 1500 written to cache), 100 output (0 reasoning)" in html
    assert '<dd id="total-micro">8925</dd>' in html  # 500 × 3 + 1000 × 0.3 + 1500 × 3.75 + 100 × 15
