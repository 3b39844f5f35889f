"""Model calls metered end to end through a real mitmdump: every response shape, streamed and not, settles
the tokens and money the upstream reported (cached input and reasoning priced right); a streamed chat
call that did not ask for usage gets it asked for upstream and the box receives exactly the upstream's
bytes less that one chunk; a call that asked gets the upstream's bytes exactly; streams reach the box as
they arrive; a cut-off stream settles at the worst case, flagged; a token cap answers a legible 402; an
echo of the injected key inside a stream reaches the box as its sentinel."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from controlplane.audit.models import AuditRecord
from controlplane.ledger.models import Cap, ModelPrice
from tests.integration.gateway.conftest import SECRET_VALUE, box_client, grant, wait_until
from tests.integration.gateway.model_upstream import EVENT_PAUSE_SECONDS, ModelUpstream

pytestmark = pytest.mark.integration
TOKENS, MICRO = 1500, 440 + 1280 + 3000  # 176 uncached, 1024 cached, 300 output (200 of them reasoning)


@pytest.fixture(scope="module")
def model():
    upstream = ModelUpstream()
    yield upstream
    upstream.close()


@pytest.fixture
def metered(stack, model, secret):
    model.requests.clear()
    model.sent.clear()
    model.finished_at.clear()
    ModelPrice.objects.create(pattern="*", input_micro_per_million=2_500_000,
                              cached_input_micro_per_million=1_250_000, output_micro_per_million=10_000_000,
                              max_output_tokens=4096)
    grant("model-api", model, secret=secret, inject_header="authorization", inject_format="Bearer {secret}",
          schemes=["http"], methods=["POST"])
    return model


def _settled(run) -> dict:
    def find():
        for record in AuditRecord.objects.filter(kind="spend", run_id_ref=run.pk).order_by("seq"):
            data = json.loads(record.body)["data"]
            if data.get("op") == "settle":
                return data
        return None
    data = wait_until(find)
    assert data is not None, "the outcome was never settled"
    return data


def _post_stream(client: httpx.Client, url: str, doc: dict) -> tuple[int, bytes, float | None]:
    with client.stream("POST", url, json=doc) as response:
        first_at, chunks = None, []
        for chunk in response.iter_raw():
            if chunk and first_at is None:
                first_at = time.monotonic()
            chunks.append(chunk)
        return response.status_code, b"".join(chunks), first_at


SHAPES = [("/v1/chat/completions", True), ("/v1/chat/completions", False), ("/v1/responses", True),
          ("/v1/responses", False), ("/v1/messages", True), ("/v1/messages", False)]


@pytest.mark.parametrize("path,stream", SHAPES, ids=[f"{p.rsplit('/', 1)[1]}-{'sse' if s else 'json'}"
                                                      for p, s in SHAPES])
def test_every_shape_settles_reported_usage(stack, metered, run_token, path, stream):
    run, token = run_token
    doc = {"model": "gpt-4o", "max_tokens": 1000, "stream": stream,
           "messages": [{"role": "user", "content": "hi"}]}
    if stream and path.endswith("chat/completions"):
        doc["stream_options"] = {"include_usage": True}  # asked by the box: bytes pass exactly
    with box_client(stack.gateway, token) as client:
        status, received, _ = _post_stream(client, metered.url(path), doc)
    assert status == 200 and received == metered.sent[0]
    model = _settled(run)["model"]
    assert (model["tokens"], model["micro"], model["flagged"]) == (TOKENS, MICRO, False)
    reasoning = 0 if path.endswith("messages") else 200  # Anthropic counts thinking inside output only
    assert (model["input"], model["cached_input"], model["output"], model["reasoning"]) == (
        1200, 1024, 300, reasoning)


def test_stream_usage_asked_for_invisibly_and_the_stream_flows(stack, metered, run_token):
    run, token = run_token
    doc = {"model": "gpt-4o-mini", "stream": True, "max_completion_tokens": 500,
           "messages": [{"role": "user", "content": "hi"}]}
    with box_client(stack.gateway, token) as client:
        status, received, first_at = _post_stream(client, metered.url("/v1/chat/completions"), doc)
    assert status == 200
    sent_upstream = json.loads(metered.requests[0]["body"])
    assert sent_upstream["stream_options"] == {"include_usage": True} and "stream_options" not in doc
    upstream_bytes = metered.sent[0]
    [usage_chunk] = [e + b"\n\n" for e in upstream_bytes.split(b"\n\n") if b'"choices":[]' in e]
    assert received == upstream_bytes.replace(usage_chunk, b"") and b"prompt_tokens" not in received
    # streamed, not buffered: the first event reached the box while the upstream was still sending
    assert first_at is not None and first_at < metered.finished_at[0] - 2 * EVENT_PAUSE_SECONDS
    model = _settled(run)["model"]
    assert (model["tokens"], model["micro"], model["flagged"]) == (TOKENS, MICRO, False)


def test_cut_off_stream_settles_worst_case_flagged(stack, metered, run_token):
    run, token = run_token
    doc = {"model": "gpt-4o", "stream": True, "max_tokens": 100, "messages": []}
    with box_client(stack.gateway, token) as client:
        with pytest.raises(httpx.HTTPError):
            _post_stream(client, metered.url("/cut/v1/chat/completions"), doc)
    model = _settled(run)["model"]
    body_size = len(metered.requests[0]["body"]) - len(b'"stream_options":{"include_usage":true},')
    assert model["flagged"] is True and model["usage"] == "worst_case"
    assert model["tokens"] == body_size + 100 and model["reserved_tokens"] == model["tokens"]


def test_token_cap_answers_a_legible_402(stack, metered, run_token):
    run, token = run_token
    Cap.objects.create(worker=run.worker, unit="tokens", window="day", limit=500)
    doc = {"model": "gpt-4o", "stream": True, "max_tokens": 1000, "messages": []}
    with box_client(stack.gateway, token) as client:
        response = client.post(metered.url("/v1/chat/completions"), json=doc)
    assert response.status_code == 402
    budget = response.json()["budget"]
    assert (budget["scope"], budget["unit"], budget["limit"], budget["spent"]) == (
        f"worker:{run.worker.name}", "tokens", 500, 0)
    assert budget["reserved"] > 1000 and metered.requests == []


def test_echo_of_the_key_inside_a_stream_reaches_the_box_as_its_sentinel(stack, metered, run_token, secret):
    _run, token = run_token
    with box_client(stack.gateway, token) as client:
        status, received, _ = _post_stream(client, metered.url("/v1/echo-stream"), {"x": 1})
    assert status == 200 and metered.requests[0]["headers"]["authorization"] == f"Bearer {SECRET_VALUE}"
    assert SECRET_VALUE.encode() not in received and secret.sentinel.encode() in received
    assert received.count(secret.sentinel.encode()) == 2


def test_a_buffered_gzip_event_stream_is_metered_and_the_usage_chunk_removed(stack, metered, run_token):
    """Not streamed (compressed): read whole, the chunk removed, re-compressed for the box."""
    run, token = run_token
    doc = {"model": "gpt-4o", "stream": True, "max_tokens": 1000, "messages": []}
    with box_client(stack.gateway, token) as client:
        response = client.post(metered.url("/v1/chat/completions"), json=doc, headers={"x-test-gzip": "1"})
    assert response.status_code == 200 and response.headers["content-encoding"] == "gzip"
    upstream_bytes = metered.sent[0]
    [usage_chunk] = [e + b"\n\n" for e in upstream_bytes.split(b"\n\n") if b'"choices":[]' in e]
    assert response.content == upstream_bytes.replace(usage_chunk, b"")
    model = _settled(run)["model"]
    assert (model["tokens"], model["micro"], model["flagged"]) == (TOKENS, MICRO, False)


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
def test_anthropic_cache_writes_settle_at_their_own_rates(stack, metered, run_token, stream):
    # Anthropic bills a write to its 5-minute cache at 1.25 times the input price, to the 1-hour cache at 2.
    ModelPrice.objects.filter(pattern="*").update(cache_write_micro_per_million=3_125_000,
                                                  cache_write_1h_micro_per_million=5_000_000)
    metered.usage.update(prompt=2000, cache_write=500, cache_write_1h=100)
    run, token = run_token
    doc = {"model": "claude-sonnet-4", "max_tokens": 1000, "stream": stream,
           "messages": [{"role": "user", "content": "hi"}]}
    try:
        with box_client(stack.gateway, token) as client:
            status, received, _ = _post_stream(client, metered.url("/v1/messages"), doc)
    finally:
        metered.usage.pop("cache_write"), metered.usage.pop("cache_write_1h")
        metered.usage["prompt"] = 1200
    assert status == 200 and received == metered.sent[0]
    model = _settled(run)["model"]
    assert (model["input"], model["cached_input"], model["cache_write"], model["cache_write_1h"]) == (
        2000, 1024, 500, 100)
    # 476 plain at 2.5, 1024 cached at 1.25, 400 written for 5 minutes at 3.125, 100 for an hour at 5,
    # 300 output at 10
    micro = 1190 + 1280 + 1250 + 500 + 3000
    assert (model["tokens"], model["micro"], model["flagged"]) == (2300, micro, False)
    assert model["micro"] <= model["reserved_micro"]
