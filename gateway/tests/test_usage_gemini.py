"""Gemini's generateContent metered like the other shapes: the call's facts from its path and
generationConfig, usage from `usageMetadata` whole, streamed as SSE (`?alt=sse`) in pieces of every size,
and as the JSON array `streamGenerateContent` answers without alt=sse; every byte passes unchanged."""

from __future__ import annotations

import json

import pytest
from roster_gateway.metering import ResponseMeter
from roster_gateway.model_calls import GEMINI, MAX_CHOICES, ModelCall, ask_for_stream_usage, model_call_of

from tests import model_shapes as m

SSE, JSON = "text/event-stream", "application/json; charset=UTF-8"
PATH = "/v1beta/models/gemini-2.5-flash:generateContent"
STREAM_PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
BODY = json.dumps({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}).encode()


def _meter(body, content_type, *, piece=None, status=200):
    call = ModelCall(api=GEMINI, model="gemini-2.5-flash", stream=content_type == SSE, max_output_tokens=None,
                     choices=1, input_estimate=100, asked_for_usage=False)
    meter = ResponseMeter(call, content_type=content_type, status=status, strip_usage_chunk=False)
    piece = piece or len(body) or 1
    out = b"".join(meter.feed(body[i:i + piece]) for i in range(0, len(body), piece)) + meter.feed(b"")
    return meter.result(), out


def _counts(usage):
    return (usage.known, usage.model, usage.input, usage.cached_input, usage.output, usage.reasoning)


CASES = [
    ("json", m.gemini_json(prompt=1200, candidates=300), JSON, (True, "gemini-2.5-flash", 1200, 0, 300, 0)),
    # promptTokenCount already holds the cached content's tokens; thoughts are output, apart from candidates
    ("json cached and thinking", m.gemini_json(prompt=5000, candidates=40, cached=4096, thoughts=900), JSON,
     (True, "gemini-2.5-flash", 5000, 4096, 940, 900)),
    ("json tool-use prompt is input", m.gemini_json(prompt=100, candidates=10, tool_prompt=250), JSON,
     (True, "gemini-2.5-flash", 350, 0, 10, 0)),
    # a total above the counts this reader knows: the rest is billed, as output
    ("json total above the parts", m.gemini_json(prompt=100, candidates=10, total=150), JSON,
     (True, "gemini-2.5-flash", 100, 0, 50, 0)),
    ("sse crlf", m.gemini_sse(prompt=50, candidates=7, thoughts=120), SSE,
     (True, "gemini-2.5-flash", 50, 0, 127, 120)),
    ("sse lf", m.gemini_sse(crlf=False, prompt=9, candidates=4, cached=8), SSE,
     (True, "gemini-2.5-flash", 9, 8, 4, 0)),
    ("json array stream", m.gemini_array(model="gemini-2.5-pro", prompt=3000, candidates=900, thoughts=768),
     JSON, (True, "gemini-2.5-pro", 3000, 0, 1668, 768)),
]


@pytest.mark.parametrize("name,body,ctype,expected", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("piece", [None, 1, 7, 64])
def test_gemini_usage_every_shape_any_chunking(name, body, ctype, expected, piece):
    usage, out = _meter(body, ctype, piece=piece)
    assert _counts(usage) == expected
    assert out == body


def test_a_stream_piece_with_lower_counts_does_not_lower_what_was_reported():
    model = "gemini-2.5-flash"
    body = _sse(m._gemini_part("a", None, m.gemini_usage(prompt=40, candidates=30), model),
                m._gemini_part("b", "STOP", {"promptTokenCount": 40, "candidatesTokenCount": 2}, model))
    usage, _ = _meter(body, SSE)
    assert (usage.input, usage.output) == (40, 30)


def _sse(*docs) -> bytes:
    return b"".join(b"data: " + json.dumps(d).encode() + b"\r\n\r\n" for d in docs)


UNKNOWN = [
    ("sse cut off before usage", m.gemini_sse(prompt=5)[:-300], SSE, "cut off"),
    ("sse finished without usage", _sse({"candidates": [{"content": {"parts": [{"text": "x"}]},
                                                          "finishReason": "STOP"}]}), SSE, "no usage"),
    ("array cut off", m.gemini_array(prompt=5)[:-40], JSON, "malformed"),
    ("json without usage", json.dumps({"candidates": []}).encode(), JSON, "no usage in response"),
    ("array of non-objects", b"[1, 2]", JSON, "malformed"),
    ("negative count", m.gemini_json(prompt=-3), JSON, "malformed"),
    ("string count", json.dumps({"usageMetadata": {"promptTokenCount": "10"}}).encode(), JSON, "malformed"),
    ("cached above the prompt", m.gemini_json(prompt=10, cached=50), JSON, "malformed"),
    ("sse count out of range", _sse({"usageMetadata": {"promptTokenCount": 2**60}}), SSE, "malformed"),
]


@pytest.mark.parametrize("name,body,ctype,problem", UNKNOWN, ids=[c[0] for c in UNKNOWN])
def test_unreadable_gemini_usage_is_unknown(name, body, ctype, problem):
    usage, out = _meter(body, ctype, piece=5)
    assert not usage.known and problem in usage.problem, usage
    assert out == body


def test_a_refused_gemini_call_without_usage_is_zero():
    error = json.dumps({"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}).encode()
    usage, _ = _meter(error, JSON, status=429)
    assert usage.known and usage.input == usage.output == 0 and "429" in usage.problem


def test_gemini_call_facts_from_path_and_generation_config():
    body = json.dumps({"contents": [], "generationConfig": {"maxOutputTokens": 2048, "candidateCount": 2}})
    call = model_call_of("POST", STREAM_PATH, body.encode())
    assert call == ModelCall(api=GEMINI, model="gemini-2.5-flash", stream=True, max_output_tokens=2048,
                             choices=2, input_estimate=len(body), asked_for_usage=False)
    assert call.as_wire()["api"] == "gemini"
    plain = model_call_of("POST", PATH, BODY)
    assert (plain.model, plain.stream, plain.max_output_tokens, plain.choices) == (
        "gemini-2.5-flash", False, None, 1)
    # Gemini streams report usage themselves: nothing is asked for, nothing is removed.
    assert ask_for_stream_usage(call, body.encode()) is None


@pytest.mark.parametrize("path,model,stream", [
    ("/v1/models/gemini-2.0-flash:generateContent", "gemini-2.0-flash", False),
    ("/v1beta/tunedModels/my-tune:streamGenerateContent", "my-tune", True),
    # spellings a server may route alike: any case, the colon percent-encoded (even twice)
    ("/v1beta/models/gemini-2.5-flash:GENERATECONTENT", "gemini-2.5-flash", False),
    ("/v1beta/models/gemini-2.5-flash%3AstreamGenerateContent?alt=sse", "gemini-2.5-flash", True),
    ("/v1beta/models/gemini-2.5-flash%253AgenerateContent", "gemini-2.5-flash", False),
])
def test_gemini_paths_are_model_calls(path, model, stream):
    call = model_call_of("POST", path, BODY)
    assert call is not None and (call.api, call.model, call.stream) == (GEMINI, model, stream)


@pytest.mark.parametrize("body,max_out,choices", [
    # protobuf's JSON reads snake_case too; with both spellings the larger is reserved
    ({"generation_config": {"max_output_tokens": 77}}, 77, 1),
    ({"generationConfig": {"maxOutputTokens": 10, "max_output_tokens": 9000}}, 9000, 1),
    ({"generationConfig": {"maxOutputTokens": 10}, "generation_config": {"maxOutputTokens": 500}}, 500, 1),
    ({"generationConfig": {"maxOutputTokens": 0}}, None, 1),
    ({"generationConfig": {"maxOutputTokens": "100"}}, None, 1),
    ({"generationConfig": {"candidateCount": 10**9}}, None, MAX_CHOICES),
    ({"generationConfig": {"candidateCount": "3"}}, None, MAX_CHOICES),
    ({"generationConfig": {"candidateCount": 2, "candidate_count": 5}}, None, 5),
    ({"generationConfig": "not an object"}, None, 1),
])
def test_gemini_bounds_take_the_worst_reading(body, max_out, choices):
    call = model_call_of("POST", PATH, json.dumps({"contents": [], **body}).encode())
    assert (call.max_output_tokens, call.choices) == (max_out, choices)


@pytest.mark.parametrize("method,path,body", [
    ("GET", PATH, BODY),
    ("POST", "/v1beta/models/gemini-2.5-flash:countTokens", BODY),
    ("POST", "/v1beta/models/gemini-2.5-flash:generateContent/extra", BODY),
    ("POST", "/v1beta/models:generateContent", BODY),
    ("POST", PATH, b"[1]"),
    ("POST", PATH, b"not json"),
    ("POST", PATH, b""),
    ("POST", PATH, b'{"contents": [], "contents": []}'),
])
def test_not_gemini_model_calls(method, path, body):
    assert model_call_of(method, path, body) is None
