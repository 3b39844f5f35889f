"""Model calls shaped as the providers send them, with tool calls and reasoning, for the journal's record
tests: one conversation per wire format (a tool call, its result, the answer), as JSON and as events."""

from __future__ import annotations

import json


def sse(events: list[dict], named: bool = False) -> bytes:
    return "".join(
        (f"event: {e.get('type')}\n" if named else "") + f"data: {json.dumps(e)}\n\n" for e in events
    ).encode()


ARGS = '{"city": "Paris", "unit": "c"}'

# --- OpenAI chat completions ---
CHAT_SYSTEM = {"role": "system", "content": "You are terse."}
CHAT_USER = {"role": "user", "content": "Weather in Paris?"}
CHAT_TOOL_CALL = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": ARGS}}
CHAT_ASSISTANT = {"role": "assistant", "content": None, "tool_calls": [CHAT_TOOL_CALL]}
CHAT_TOOL = {"role": "tool", "tool_call_id": "call_1", "content": "18 C, cloudy"}


def chat_request(*messages) -> dict:
    return {"model": "gpt-4o", "messages": list(messages)}


def chat_json(content=None, tool_calls=None, reasoning=None) -> dict:
    message = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning:
        message["reasoning_content"] = reasoning
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


def chat_sse_tool_call() -> bytes:
    def chunk(delta):
        return {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}

    return (
        sse(
            [
                chunk({"role": "assistant", "content": None, "reasoning_content": "need "}),
                chunk({"reasoning_content": "the tool"}),
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "weather", "arguments": ""},
                            }
                        ]
                    }
                ),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": ARGS[:9]}}]}),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": ARGS[9:]}}]}),
                {"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": {"total_tokens": 9}},
            ]
        )
        + b"data: [DONE]\n\n"
    )


# --- OpenAI Responses ---
RESPONSES_TOOL_CALL = {"type": "function_call", "call_id": "call_r1", "name": "weather", "arguments": ARGS}


def responses_json(text=None, call=None, reasoning=None) -> dict:
    output = []
    if reasoning:
        output.append(
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": reasoning}]}
        )
    if call:
        output.append({"id": "fc_1", "status": "completed", **call})
    if text:
        output.append(
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    return {"id": "resp_1", "object": "response", "status": "completed", "model": "o4-mini", "output": output}


def responses_sse(text: str) -> bytes:
    half = len(text) // 2
    return sse(
        [
            {"type": "response.created", "response": {"id": "resp_2", "status": "in_progress", "output": []}},
            {"type": "response.output_text.delta", "delta": text[:half]},
            {"type": "response.output_text.delta", "delta": text[half:]},
            {"type": "response.completed", "response": responses_json(text=text)},
        ],
        named=True,
    )


# --- Anthropic Messages ---
ANTHROPIC_TOOL_USE = {
    "type": "tool_use",
    "id": "toolu_1",
    "name": "weather",
    "input": {"city": "Paris", "unit": "c"},
}


def anthropic_json(*blocks) -> dict:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-20250514",
        "content": list(blocks),
        "stop_reason": "tool_use",
    }


def anthropic_sse_tool_use() -> bytes:
    return sse(
        [
            {
                "type": "message_start",
                "message": {"id": "msg_2", "type": "message", "role": "assistant", "content": []},
            },
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "call it"},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "sig"},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}},
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": ARGS[:7]},
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": ARGS[7:]},
            },
            {"type": "content_block_stop", "index": 1},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
            {"type": "message_stop"},
        ],
        named=True,
    )
