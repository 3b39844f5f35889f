"""The scripted model speaks Gemini's generateContent as Google's servers do: a whole response, SSE with
`?alt=sse` and the JSON array without it, each piece with usageMetadata, function calls as whole
`functionCall` parts; the key only in `x-goog-api-key`, anything else refused in Gemini's error shape."""

from __future__ import annotations

import json

import httpx
import pytest

from tools.scripted_model.script import script_parse
from tools.scripted_model.server import scripted_model_server

KEY = "AIza-the-real-key"
SCRIPT = script_parse({"model": "gemini-2.5-flash", "steps": [
    {"say": "Writing it.", "tool": "write_file",
     "arguments": {"file_path": "/workspace/a.txt", "content": "x"}},
    {"say": "Done, and that is a long enough answer to be streamed in several pieces."},
]})
PATH = "/v1beta/models/gemini-2.5-flash:"
FIRST = {"contents": [{"role": "user", "parts": [{"text": "go"}]}]}
SECOND = {"contents": [*FIRST["contents"],
                       {"role": "model", "parts": [{"functionCall": {"name": "write_file", "args": {}}}]},
                       {"role": "user", "parts": [{"functionResponse": {"name": "write_file",
                                                                        "response": {"output": "ok"}}}]}]}


@pytest.fixture
def server():
    with scripted_model_server(SCRIPT, KEY) as (port, model):
        yield httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"x-goog-api-key": KEY}), model


def test_generate_content_calls_the_tool_then_answers(server):
    client, model = server
    first = client.post(PATH + "generateContent", json=FIRST).json()
    parts = first["candidates"][0]["content"]["parts"]
    assert parts[0] == {"text": "Writing it."}
    assert parts[1]["functionCall"]["name"] == "write_file"
    assert parts[1]["functionCall"]["args"] == {"file_path": "/workspace/a.txt", "content": "x"}
    meta = first["usageMetadata"]
    assert meta["totalTokenCount"] == meta["promptTokenCount"] + meta["candidatesTokenCount"] > 0
    second = client.post(PATH + "generateContent", json=SECOND).json()
    assert second["candidates"][0]["content"]["parts"][0]["text"].startswith("Done")
    assert [(r["api"], r["step"], r["stream"]) for r in model.records] == [("gemini", 0, False),
                                                                           ("gemini", 1, False)]
    usage = model.records[0]["usage"]
    assert (usage["input"], usage["output"]) == (meta["promptTokenCount"], meta["candidatesTokenCount"])


def test_sse_stream_pieces_each_with_usage_the_last_whole(server):
    client, model = server
    response = client.post(PATH + "streamGenerateContent?alt=sse", json=SECOND)
    assert response.headers["content-type"] == "text/event-stream"
    events = [json.loads(e.removeprefix("data: ")) for e in response.text.split("\r\n\r\n") if e]
    assert len(events) > 3 and all("usageMetadata" in e for e in events)
    text = "".join(p.get("text", "") for e in events for p in e["candidates"][0]["content"]["parts"])
    assert text.startswith("Done") and events[-1]["candidates"][0]["finishReason"] == "STOP"
    assert events[-1]["usageMetadata"]["candidatesTokenCount"] == model.records[0]["usage"]["output"]
    assert "candidatesTokenCount" not in events[0]["usageMetadata"]
    assert model.records[0]["sse"] is True


def test_stream_without_alt_sse_is_one_json_array(server):
    client, model = server
    response = client.post(PATH + "streamGenerateContent", json=FIRST)
    assert response.headers["content-type"].startswith("application/json")
    pieces = response.json()
    assert isinstance(pieces, list) and pieces[-1]["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert pieces[-1]["usageMetadata"]["promptTokenCount"] == model.records[0]["usage"]["input"]
    assert model.records[0]["sse"] is False


@pytest.mark.parametrize("headers", [{}, {"x-goog-api-key": "AIza-wrong"},
                                     {"authorization": f"Bearer {KEY}"}])
def test_any_other_key_is_refused_in_geminis_error_shape(server, headers):
    client, model = server
    client.headers.pop("x-goog-api-key")
    response = client.post(PATH + "generateContent", json=FIRST, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert model.records[-1]["authorized"] is False and "usage" not in model.records[-1]
