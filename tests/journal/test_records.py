"""The run's journal built from its stored calls (controlplane.journal.records): per wire format (OpenAI
chat, Responses, Anthropic Messages; JSON and event streams) the session start, user turns, assistant
turns with content, reasoning and tool calls exactly as returned, tool results with the data class and
untrusted flag of what the run had fetched, and cache loss when a call's history is rewritten; `run
journal` prints them as JSON lines and as text."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from controlplane.core.taint import DataClass
from controlplane.journal.records import run_records
from tests.egress.fixtures import decide_body
from tests.journal import shapes as s
from tests.journal.support import journal_call

pytestmark = pytest.mark.django_db


def _records(run) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("at", "decision_id")} for r in run_records(run)]


def _fetch_secret_page(gateway, token, make_grant):
    """Between two model calls the run fetches an untrusted, secret-class page (a tool's result)."""
    make_grant(
        slug="docs",
        host="docs.example",
        result_class=DataClass.SECRET,
        untrusted=True,
        max_taint=DataClass.SECRET,
    )
    answer = gateway.decide(decide_body(token, host="docs.example", path="/page", method="GET"))
    assert answer["verdict"] == "allow"


def test_chat_json_conversation(gateway, live_run, make_grant):
    run, token = live_run
    make_grant(max_taint=DataClass.SECRET)
    journal_call(
        gateway,
        token,
        s.chat_request(s.CHAT_SYSTEM, s.CHAT_USER),
        s.chat_json(tool_calls=[s.CHAT_TOOL_CALL], reasoning="I should call weather"),
    )
    _fetch_secret_page(gateway, token, make_grant)
    journal_call(
        gateway,
        token,
        s.chat_request(s.CHAT_SYSTEM, s.CHAT_USER, s.CHAT_ASSISTANT, s.CHAT_TOOL),
        s.chat_json(content="18 C in Paris."),
    )
    records = _records(run)
    assert [r["type"] for r in records] == [
        "session_start",
        "user_turn",
        "assistant_turn",
        "tool_result",
        "assistant_turn",
    ]
    start, user, first, tool, last = records
    assert start["api"] == "chat" and start["model"] == "gpt-4o" and start["system"] == "You are terse."
    assert user["content"] == "Weather in Paris?" and user["role"] == "user"
    assert first["tool_calls"] == [s.CHAT_TOOL_CALL] and first["reasoning"] == "I should call weather"
    assert tool == {
        "type": "tool_result",
        "tool_call_id": "call_1",
        "content": "18 C, cloudy",
        "data_class": "secret",
        "untrusted": True,
        "truncated": False,
    }
    assert last["content"] == "18 C in Paris." and last["status"] == 200


def test_chat_stream_tool_call_is_joined_from_its_deltas_exactly(gateway, live_run, make_grant):
    run, token = live_run
    make_grant()
    journal_call(gateway, token, s.chat_request(s.CHAT_USER), s.chat_sse_tool_call(), streamed=True)
    turn = _records(run)[-1]
    assert turn["reasoning"] == "need the tool" and turn["content"] == ""
    assert turn["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": s.ARGS}}
    ]


def test_responses_json_and_stream(gateway, live_run, make_grant):
    run, token = live_run
    make_grant(paths=["/v1/*"])
    path = "/v1/responses"
    first = {"model": "o4-mini", "instructions": "Be brief.", "input": "Weather in Paris?"}
    journal_call(
        gateway,
        token,
        first,
        s.responses_json(call=s.RESPONSES_TOOL_CALL, reasoning="use the tool"),
        path=path,
    )
    second = {
        "model": "o4-mini",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": "Weather in Paris?"},
            s.RESPONSES_TOOL_CALL,
            {"type": "function_call_output", "call_id": "call_r1", "output": "18 C"},
        ],
    }
    journal_call(gateway, token, second, s.responses_sse("It is 18 C."), path=path, streamed=True)
    records = _records(run)
    kinds = [r["type"] for r in records]
    assert (
        kinds[:3] == ["session_start", "user_turn", "assistant_turn"] and records[0]["system"] == "Be brief."
    )
    assert records[2]["tool_calls"] == [{"id": "call_r1", "name": "weather", "arguments": s.ARGS}]
    assert records[2]["reasoning"] == "use the tool"
    # The first call's string input is the second's first item: the history was extended, not rewritten.
    assert "cache_loss" not in kinds and records[-1]["content"] == "It is 18 C."
    [tool] = [r for r in records if r["type"] == "tool_result"]
    assert tool["tool_call_id"] == "call_r1" and tool["content"] == "18 C"


def test_anthropic_json_and_stream(gateway, live_run, make_grant):
    run, token = live_run
    make_grant(paths=["/v1/*"])
    path = "/v1/messages"
    user = {"role": "user", "content": "Weather in Paris?"}
    first = {
        "model": "claude-sonnet-4-20250514",
        "system": "Be brief.",
        "max_tokens": 100,
        "messages": [user],
    }
    journal_call(gateway, token, first, s.anthropic_sse_tool_use(), path=path, streamed=True)
    assistant = {"role": "assistant", "content": [s.ANTHROPIC_TOOL_USE]}
    result = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"},
            {"type": "text", "text": "thanks"},
        ],
    }
    journal_call(
        gateway,
        token,
        {**first, "messages": [user, assistant, result]},
        s.anthropic_json(
            {"type": "thinking", "thinking": "done", "signature": "x"}, {"type": "text", "text": "18 C."}
        ),
        path=path,
    )
    records = _records(run)
    assert [r["type"] for r in records] == [
        "session_start",
        "user_turn",
        "assistant_turn",
        "user_turn",
        "tool_result",
        "assistant_turn",
    ]
    streamed = records[2]
    assert streamed["reasoning"] == "call it"
    assert streamed["tool_calls"] == [{"id": "toolu_1", "name": "weather", "input": json.loads(s.ARGS)}]
    assert records[3]["content"] == [{"type": "text", "text": "thanks"}]
    assert records[4]["tool_call_id"] == "toolu_1" and records[4]["untrusted"] is False
    assert records[5]["content"] == "18 C." and records[5]["reasoning"] == "done"


def test_a_rewritten_history_is_a_cache_loss(gateway, live_run, make_grant):
    run, token = live_run
    make_grant()
    journal_call(gateway, token, s.chat_request(s.CHAT_SYSTEM, s.CHAT_USER), s.chat_json(content="a"))
    edited = {"role": "system", "content": "You are verbose."}
    journal_call(gateway, token, s.chat_request(edited, s.CHAT_USER), s.chat_json(content="b"))
    [loss] = [r for r in _records(run) if r["type"] == "cache_loss"]
    assert loss == {"type": "cache_loss", "kept": 0, "previous": 2, "now": 2}


def test_unreadable_bodies_and_failed_calls_are_records_too(gateway, live_run, make_grant):
    run, token = live_run
    make_grant()
    journal_call(gateway, token, b'{"model": "m", "messages": [', None, error="connection reset")
    kinds = [(r["type"], r.get("part")) for r in _records(run)]
    assert kinds == [("unreadable", "request"), ("unreadable", "response")]


def test_run_journal_command_prints_jsonl_and_text(gateway, live_run, make_grant):
    run, token = live_run
    make_grant()
    journal_call(gateway, token, s.chat_request(s.CHAT_USER), s.chat_json(content="hi\x1b[2Jthere"))
    out = io.StringIO()
    call_command("run", "journal", str(run.pk), "--format", "jsonl", stdout=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["type"] for r in lines] == ["session_start", "user_turn", "assistant_turn"]
    assert lines[-1]["content"] == "hi\x1b[2Jthere"
    text = io.StringIO()
    call_command("run", "journal", str(run.pk), "--format", "text", stdout=text)
    assert "assistant (200): hi\\x1b[2Jthere" in text.getvalue() and "\x1b" not in text.getvalue()
