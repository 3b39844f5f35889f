"""The scripted model server speaks each provider's wire format well enough for the official clients
(openai, anthropic) to parse it, streamed and whole, and refuses any key but its own."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from tools.scripted_model.script import END_OF_SCRIPT, ScriptError, responses_turns, script_parse
from tools.scripted_model.server import scripted_model_server

KEY = "sk-the-real-key"
SCRIPT = script_parse({"model": "roster-scripted", "steps": [
    {"say": "Looking.", "tool": "fetch_url", "arguments": {"url": "https://docs.example/a"}},
    {"say": "The page says hello, and that is a long enough answer to be streamed in several pieces."},
]})


@pytest.fixture
def server():
    with scripted_model_server(SCRIPT, KEY) as (port, model):
        yield f"http://127.0.0.1:{port}", model


def _openai(url, key=KEY):
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def test_chat_completion_whole_calls_the_scripted_tool_then_answers(server):
    url, model = server
    client = _openai(url)
    first = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}])
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "fetch_url" and json.loads(call.function.arguments) == {"url": "https://docs.example/a"}
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    history = [{"role": "user", "content": "go"}, first.choices[0].message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": call.id, "content": "hello"}]
    second = client.chat.completions.create(model="m", messages=history)
    assert second.choices[0].message.content.startswith("The page says hello")
    assert second.choices[0].finish_reason == "stop"
    assert [r["step"] for r in model.records] == [0, 1] and all(r["authorized"] for r in model.records)


def test_chat_completion_stream_with_usage_and_tool_call_deltas(server):
    url, _ = server
    chunks = list(_openai(url).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "go"}], stream=True,
        stream_options={"include_usage": True}))
    arguments = "".join(c.choices[0].delta.tool_calls[0].function.arguments or ""
                        for c in chunks if c.choices and c.choices[0].delta.tool_calls)
    assert json.loads(arguments) == {"url": "https://docs.example/a"}
    assert len([c for c in chunks if c.choices and c.choices[0].delta.tool_calls]) > 2  # really in pieces
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0 and chunks[-1].choices == []


def test_responses_whole_and_streamed(server):
    url, _ = server
    client = _openai(url)
    whole = client.responses.create(model="m", input="go")
    assert whole.output[0].type == "message" and whole.output[1].type == "function_call"
    assert whole.usage.input_tokens > 0
    events = list(client.responses.create(model="m", input="go", stream=True))
    assert events[-1].type == "response.completed" and events[-1].response.usage.output_tokens > 0
    assert any(e.type == "response.function_call_arguments.delta" for e in events)


def test_anthropic_messages_whole_and_streamed(server):
    url, model = server
    client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
    whole = client.messages.create(model="m", max_tokens=100, messages=[{"role": "user", "content": "go"}])
    assert whole.stop_reason == "tool_use" and whole.content[1].input == {"url": "https://docs.example/a"}
    with client.messages.stream(model="m", max_tokens=100, messages=[{"role": "user", "content": "go"}]) as s:
        final = s.get_final_message()
    assert final.content[1].name == "fetch_url" and final.usage.output_tokens > 0
    assert all(r["authorized"] for r in model.records)


def test_a_wrong_or_missing_key_is_refused_and_recorded(server):
    url, model = server
    with pytest.raises(openai.AuthenticationError):
        _openai(url, key="sk-proj-sentinel").chat.completions.create(model="m", messages=[])
    assert httpx.post(url + "/v1/messages", json={"messages": []}).status_code == 401
    assert [r["authorized"] for r in model.records] == [False, False]
    assert "sk-proj-sentinel" not in json.dumps(model.records)  # what it carried is never recorded
    assert httpx.get(url + "/_scripted/requests").json()["requests"] == model.records


def test_past_the_last_step_the_script_is_over(server):
    url, _ = server
    history = [{"role": "user", "content": "go"}] + [{"role": "assistant", "content": "x"}] * 5
    answer = _openai(url).chat.completions.create(model="m", messages=history)
    assert answer.choices[0].message.content == END_OF_SCRIPT


def test_turns_in_a_responses_conversation():
    items = [{"role": "user", "content": "go"}, {"type": "function_call", "call_id": "a"},
             {"type": "function_call", "call_id": "b"}, {"type": "function_call_output", "call_id": "a"},
             {"type": "function_call_output", "call_id": "b"}, {"role": "assistant", "content": "x"}]
    assert responses_turns({"input": items}) == 2 and responses_turns({"input": "go"}) == 0


@pytest.mark.parametrize(("data", "message"), [
    ({"steps": []}, "non-empty list"),
    ({"steps": [{}]}, "says something or calls a tool"),
    ({"steps": [{"say": "x", "extra": 1}]}, "unknown keys"),
    ({"steps": [{"tools": [{"arguments": {}}]}]}, "non-empty name"),
    ({"steps": [{"tool": "t", "arguments": [1]}]}, "arguments must be an object"),
])
def test_bad_scripts_are_named_errors(data, message):
    with pytest.raises(ScriptError, match=message):
        script_parse(data)
