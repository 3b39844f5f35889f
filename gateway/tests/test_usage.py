"""Usage read from every response shape, whole and streamed in pieces of every size, and the one extra
usage chunk removed when the gateway asked for it (everything else byte-identical)."""

from __future__ import annotations

import json

import pytest
from roster_gateway.metering import ResponseMeter
from roster_gateway.model_calls import (
    CHAT,
    MESSAGES,
    RESPONSES,
    ModelCall,
    ask_for_stream_usage,
    model_call_of,
)

from tests import model_shapes as m

SSE, JSON = "text/event-stream; charset=utf-8", "application/json"


def _call(api, model="req-model", stream=False, asked=False):
    return ModelCall(api=api, model=model, stream=stream, max_output_tokens=None, choices=1,
                     input_estimate=100, asked_for_usage=asked)


def _meter(api, body, content_type, *, piece=None, strip=False, status=200):
    meter = ResponseMeter(_call(api, stream=content_type == SSE), content_type=content_type, status=status,
                          strip_usage_chunk=strip)
    piece = piece or len(body) or 1
    out = b"".join(meter.feed(body[i:i + piece]) for i in range(0, len(body), piece)) + meter.feed(b"")
    return meter.result(), out


def _counts(usage):
    return (usage.known, usage.model, usage.input, usage.cached_input, usage.output, usage.reasoning,
            usage.cache_write, usage.cache_write_1h)


CASES = [
    ("chat json", CHAT, m.chat_json(prompt=1200, completion=300, cached=1024, reasoning=0), JSON,
     (True, "gpt-4o-2024-08-06", 1200, 1024, 300, 0, 0, 0)),
    ("chat json reasoning", CHAT, m.chat_json(model="o3-mini", prompt=75, completion=1186, reasoning=1024),
     JSON, (True, "o3-mini", 75, 0, 1186, 1024, 0, 0)),
    ("chat sse usage last chunk", CHAT, m.chat_sse(prompt=50, completion=7, cached=32), SSE,
     (True, "gpt-4o-mini", 50, 32, 7, 0, 0, 0)),
    ("chat sse usage on a content chunk", CHAT,
     m.chat_sse(usage_on_content=True, prompt=9, completion=4, cached=8), SSE,
     (True, "gpt-4o-mini", 9, 8, 4, 0, 0, 0)),
    ("responses json", RESPONSES, m.responses_json(input=36, output=87, cached=12, reasoning=64), JSON,
     (True, "gpt-4.1-2025-04-14", 36, 12, 87, 64, 0, 0)),
    ("responses sse", RESPONSES, m.responses_sse(input=3000, output=900, cached=2048, reasoning=768), SSE,
     (True, "o4-mini-2025-04-16", 3000, 2048, 900, 768, 0, 0)),
    ("anthropic json cache", MESSAGES,
     m.anthropic_json(input=100, output=503, cache_read=2000, cache_write=50), JSON,
     (True, "claude-sonnet-4-20250514", 2150, 2000, 503, 0, 50, 0)),
    ("anthropic json 1-hour cache writes", MESSAGES,
     m.anthropic_json(input=10, output=5, cache_read=0, cache_write=3000, cache_write_1h=1000), JSON,
     (True, "claude-sonnet-4-20250514", 3010, 0, 5, 0, 3000, 1000)),
    ("anthropic sse cache writes", MESSAGES,
     m.anthropic_sse(input=25, output=15, cache_read=100, cache_write=2000, cache_write_1h=2000), SSE,
     (True, "claude-sonnet-4-20250514", 2125, 100, 15, 0, 2000, 2000)),
    ("anthropic sse", MESSAGES, m.anthropic_sse(input=25, output=15, cache_read=4000), SSE,
     (True, "claude-sonnet-4-20250514", 4025, 4000, 15, 0, 0, 0)),
]


@pytest.mark.parametrize("name,api,body,ctype,expected", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("piece", [None, 1, 7, 64])
def test_usage_every_shape_any_chunking(name, api, body, ctype, expected, piece):
    usage, out = _meter(api, body, ctype, piece=piece)
    assert _counts(usage) == expected
    assert out == body  # nothing to remove: every byte passes, in order


UNKNOWN = [
    ("chat sse cut off before usage", CHAT, m.chat_sse(prompt=5)[:-60], SSE, "cut off"),
    ("chat sse without usage, ended with [DONE]", CHAT, m.chat_sse(include_usage=False), SSE,
     "finished with its end marker but reported none"),
    ("chat sse without usage or [DONE]", CHAT, m.chat_sse(include_usage=False, done=False), SSE,
     "cut off"),
    ("responses sse cut off", RESPONSES, m.responses_sse(complete=False), SSE, "cut off"),
    ("anthropic sse cut off", MESSAGES, m.anthropic_sse(complete=False), SSE, "cut off"),
    ("malformed json", CHAT, b'{"usage": {"prompt_tokens": ', JSON, "malformed"),
    ("negative count", CHAT, json.dumps({"usage": {"prompt_tokens": -1}}).encode(), JSON, "malformed"),
    ("float count", RESPONSES, json.dumps({"usage": {"input_tokens": 1.5}}).encode(), JSON, "malformed"),
    ("bool count", MESSAGES, json.dumps({"usage": {"input_tokens": True}}).encode(), JSON, "malformed"),
    ("cached above input", CHAT, m.chat_json(prompt=5, cached=6), JSON, "malformed"),
    ("1-hour cache writes above all writes", MESSAGES, m.anthropic_json(cache_write=5, cache_write_1h=6),
     JSON, "malformed"),
    ("cache write split not a count", MESSAGES,
     json.dumps({"usage": {"cache_creation": {"ephemeral_1h_input_tokens": "9"}}}).encode(), JSON,
     "malformed"),
    ("no usage", CHAT, b'{"id": "x", "choices": []}', JSON, "no usage"),
    ("unknown shape html", CHAT, b"<html>hi</html>", "text/html", "malformed"),
    ("malformed sse event", CHAT, b"data: {not json\n\n", SSE, "malformed"),
    ("message_delta alone", MESSAGES, b'data: {"type":"message_delta","usage":{"output_tokens":3}}\n\n', SSE,
     "malformed"),
]


@pytest.mark.parametrize("name,api,body,ctype,problem", UNKNOWN, ids=[c[0] for c in UNKNOWN])
def test_unreadable_usage_is_unknown(name, api, body, ctype, problem):
    usage, out = _meter(api, body, ctype, piece=5)
    assert not usage.known and problem in usage.problem
    assert out == body


def test_error_status_without_usage_is_zero_and_says_why():
    usage, _ = _meter(CHAT, b'{"error": {"message": "rate limited"}}', JSON, status=429)
    assert usage.known and usage.input == usage.output == 0 and "429" in usage.problem


def test_oversized_event_is_unknown_and_passes_through():
    meter = ResponseMeter(_call(CHAT, stream=True), content_type=SSE, status=200, strip_usage_chunk=True,
                          max_event_bytes=100)
    body = b"data: " + b"x" * 300 + b"\n\n" + m.chat_sse()
    out = b"".join(meter.feed(body[i:i + 50]) for i in range(0, len(body), 50)) + meter.feed(b"")
    assert out == body and not meter.result().known


@pytest.mark.parametrize("piece", [None, 1, 3, 50])
@pytest.mark.parametrize("crlf", [False, True])
def test_added_usage_chunk_removed_everything_else_byte_identical(piece, crlf):
    upstream = m.chat_sse(prompt=70, completion=3, cached=64)
    if crlf:
        upstream = upstream.replace(b"\n", b"\r\n")
    usage, out = _meter(CHAT, upstream, SSE, piece=piece, strip=True)
    assert _counts(usage) == (True, "gpt-4o-mini", 70, 64, 3, 0, 0, 0)
    sep = b"\r\n\r\n" if crlf else b"\n\n"
    events = upstream.split(sep)
    removed = [e for e in events if b'"choices":[]' in e]
    assert len(removed) == 1
    assert out == upstream.replace(removed[0] + sep, b"")
    assert b'"prompt_tokens"' not in out and out.endswith(b"data: [DONE]" + sep)


@pytest.mark.parametrize("crlf", [False, True])
def test_usage_the_gateway_asked_for_on_a_content_chunk_is_removed_from_that_chunk_only(crlf):
    """The box that did not ask for usage never sees it: an upstream that puts it on its last content
    chunk gets that chunk passed on without its `usage` member; every other event byte for byte."""
    upstream = m.chat_sse(usage_on_content=True, prompt=9, completion=4)
    sep = b"\r\n\r\n" if crlf else b"\n\n"
    upstream = upstream.replace(b"\n\n", sep)
    usage, out = _meter(CHAT, upstream, SSE, piece=11, strip=True)
    assert usage.known and (usage.input, usage.output) == (9, 4)
    sent, received = upstream.split(sep), out.split(sep)
    changed = [i for i, (a, b) in enumerate(zip(sent, received, strict=True)) if a != b]
    assert len(changed) == 1 and b'"prompt_tokens"' not in out
    before = json.loads(sent[changed[0]][len(b"data: "):])
    after = json.loads(received[changed[0]][len(b"data: "):])
    assert "usage" in before and after == {k: v for k, v in before.items() if k != "usage"}


def test_usage_on_a_content_chunk_the_box_asked_for_passes_unchanged():
    upstream = m.chat_sse(usage_on_content=True, prompt=9, completion=4)
    usage, out = _meter(CHAT, upstream, SSE, piece=11, strip=False)
    assert usage.known and out == upstream


# --- requests ---
def test_model_call_facts():
    body = json.dumps({"model": "gpt-4o", "stream": True, "n": 3, "max_tokens": 50,
                       "max_completion_tokens": 80, "messages": []}).encode()
    call = model_call_of("POST", "/v1/chat/completions?x=1", body)
    assert (call.api, call.model, call.stream, call.max_output_tokens, call.choices, call.input_estimate) == (
        CHAT, "gpt-4o", True, 80, 3, len(body))
    responses = model_call_of("POST", "/v1/responses", b'{"model":"o3","max_output_tokens":9}')
    assert responses.max_output_tokens == 9
    assert model_call_of("POST", "/v1/messages", b'{"model":"claude","max_tokens":7}').api == MESSAGES


@pytest.mark.parametrize("method,path,body", [
    ("GET", "/v1/chat/completions", b'{"model":"x"}'),
    ("POST", "/v1/embeddings", b'{"model":"x"}'),
    ("POST", "/v1/chat/completions", b'{"model": 5}'),
    ("POST", "/v1/chat/completions", b'not json'),
    ("POST", "/v1/chat/completions", b'["model"]'),
])
def test_not_model_calls(method, path, body):
    assert model_call_of(method, path, body) is None


def test_duplicate_keys_are_not_read_one_way_here_and_another_upstream():
    assert model_call_of("POST", "/v1/chat/completions", b'{"model":"a","model":"b"}') is None


@pytest.mark.parametrize("n", [0, -1, 10**9, "3", True])
def test_bad_choice_counts_take_the_worst_case(n):
    call = model_call_of("POST", "/v1/chat/completions", json.dumps({"model": "m", "n": n}).encode())
    assert call.choices == 128


def test_stream_usage_inserted_keeping_every_other_byte():
    body = (b'{\n  "model": "gpt-4o",\n  "stream": true,\n'
            b'  "messages": [{"role": "user", "content": "\\u00e9"}]\n}')
    call = model_call_of("POST", "/v1/chat/completions", body)
    sent = ask_for_stream_usage(call, body)
    assert sent == b'{"stream_options":{"include_usage":true},' + body[1:]
    assert json.loads(sent)["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("options", [{"include_usage": False}, None, "x", {"other": 1}])
def test_stream_usage_forced_whatever_the_box_said(options):
    body = json.dumps({"model": "m", "stream": True, "stream_options": options}).encode()
    sent = ask_for_stream_usage(model_call_of("POST", "/v1/chat/completions", body), body)
    assert json.loads(sent)["stream_options"]["include_usage"] is True


@pytest.mark.parametrize("body", [
    {"model": "m", "stream": True, "stream_options": {"include_usage": True}},  # asked itself
    {"model": "m", "stream": False},
    {"model": "m"},
])
def test_stream_usage_left_alone(body):
    raw = json.dumps(body).encode()
    assert ask_for_stream_usage(model_call_of("POST", "/v1/chat/completions", raw), raw) is None


def _anthropic_stream(start_usage: dict, delta_usage: dict) -> bytes:
    return m._sse([
        ("message_start", {"type": "message_start",
                           "message": {"model": "claude-sonnet-4", "usage": start_usage}}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": delta_usage}),
        ("message_stop", {"type": "message_stop"})])


START = {"input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5000,
         "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 4000},
         "output_tokens": 1}


@pytest.mark.parametrize("delta", [
    {"output_tokens": 20},  # older streams: the delta carries the output only
    {"input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5000,
     "output_tokens": 20},  # newer ones repeat the input counts, without the lifetime split
    {"input_tokens": 10, "cache_read_input_tokens": None, "cache_creation_input_tokens": None,
     "output_tokens": 20},  # null counts: not sent, not zero
    {"cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": None},
     "output_tokens": 20},  # a null inside the split too
    {"cache_creation": {}, "output_tokens": 20},
    {"input_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
     "cache_creation": {"ephemeral_1h_input_tokens": 0}, "output_tokens": 20},  # cumulative: never lower
], ids=["output-only", "repeats-input", "nulls", "null-in-split", "empty-split", "lower"])
def test_a_message_delta_keeps_what_message_start_said_unless_it_says_otherwise(delta):
    usage, _ = _meter(MESSAGES, _anthropic_stream(START, delta), SSE, piece=9)
    assert _counts(usage) == (True, "claude-sonnet-4", 5110, 100, 20, 0, 5000, 4000)


def test_a_message_delta_with_higher_counts_is_taken():
    delta = {"cache_creation_input_tokens": 6000, "output_tokens": 20,
             "cache_creation": {"ephemeral_1h_input_tokens": 5000}}
    usage, _ = _meter(MESSAGES, _anthropic_stream(START, delta), SSE)
    assert (usage.input, usage.cache_write, usage.cache_write_1h, usage.output) == (6110, 6000, 5000, 20)


@pytest.mark.parametrize("delta", [{}, {"output_tokens": None}], ids=["no-output", "null-output"])
def test_a_message_delta_without_its_output_keeps_the_start_output_not_zero(delta):
    usage, _ = _meter(MESSAGES, _anthropic_stream({**START, "output_tokens": 7}, delta), SSE)
    assert usage.known and usage.output == 7 and usage.input == 5110


@pytest.mark.parametrize("usage_doc", [
    {"input_tokens": 1, "cache_creation_input_tokens": 100,
     "cache_creation": {"ephemeral_5m_input_tokens": 900, "ephemeral_1h_input_tokens": 0}},
    {"input_tokens": 1, "cache_creation": {"ephemeral_5m_input_tokens": 5}},  # a split without a total
], ids=["split-above-total", "split-without-total"])
def test_a_lifetime_split_above_the_cache_writes_is_malformed(usage_doc):
    body = json.dumps({"model": "claude-sonnet-4", "usage": {**usage_doc, "output_tokens": 1}}).encode()
    for meter_input in [(body, JSON), (_anthropic_stream(usage_doc, {"output_tokens": 1}), SSE)]:
        usage, _ = _meter(MESSAGES, *meter_input)
        assert not usage.known and "malformed" in usage.problem


def _anthropic_events(start_usage: dict, *deltas: dict) -> bytes:
    events = [("message_start", {"type": "message_start",
                                 "message": {"model": "claude-sonnet-4", "usage": start_usage}})]
    events += [("message_delta", {"type": "message_delta", "delta": {}, "usage": delta}) for delta in deltas]
    return m._sse([*events, ("message_stop", {"type": "message_stop"})])


@pytest.mark.parametrize("deltas,expected", [
    (({"output_tokens": 500}, {"output_tokens": 20}), (5110, 5000, 500)),
    (({"output_tokens": 500}, {}), (5110, 5000, 500)),
    (({"cache_creation_input_tokens": 9000}, {"output_tokens": 30}), (9110, 9000, 30)),
], ids=["lower-later", "empty-later", "higher-then-output"])
def test_every_delta_is_laid_over_all_that_was_reported_before(deltas, expected):
    usage, _ = _meter(MESSAGES, _anthropic_events(START, *deltas), SSE)
    assert usage.known and (usage.input, usage.cache_write, usage.output) == expected


@pytest.mark.parametrize("delta", [{"input_tokens": -5, "output_tokens": 3},
                                   {"cache_creation": {"ephemeral_1h_input_tokens": -1}, "output_tokens": 3},
                                   {"output_tokens": 2**60}], ids=["negative", "negative-in-split", "absurd"])
def test_a_delta_count_out_of_range_is_malformed_not_ignored(delta):
    usage, _ = _meter(MESSAGES, _anthropic_events(START, delta), SSE)
    assert not usage.known and "malformed" in usage.problem
