"""One scripted step in each provider's wire format: a whole JSON body, or the server-sent events of a
stream. Shapes follow the public API references (OpenAI chat completions and responses, Anthropic
messages) closely enough for their official clients to parse them."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator

from tools.scripted_model.script import Step, estimate_tokens

PIECE = 12  # characters per streamed delta: several deltas per answer, as real servers send


def _pieces(text: str) -> list[str]:
    return [text[i:i + PIECE] for i in range(0, len(text), PIECE)] or [""]


def _id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(8)}"


def usage_numbers(step: Step, request_bytes: bytes) -> tuple[int, int]:
    """(input, output) tokens this step reports for this request, in every format: the server records
    them too, so a test can compare what was metered with what the upstream said."""
    output = step.say + "".join(c.name + json.dumps(c.arguments) for c in step.calls)
    return estimate_tokens(request_bytes), estimate_tokens(output)


def sse(data: dict | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


# --- OpenAI chat completions ---

def chat_completion(step: Step, model: str, request_bytes: bytes) -> dict:
    prompt, completion = usage_numbers(step, request_bytes)
    message: dict = {"role": "assistant", "content": step.say or None}
    if step.calls:
        message["tool_calls"] = [
            {"id": _id("call_"), "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}} for c in step.calls]
    return {"id": _id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": step.finish_reason,
                         "logprobs": None}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}}


def chat_completion_stream(step: Step, model: str, request_bytes: bytes,
                           include_usage: bool) -> Iterator[bytes]:
    prompt, completion = usage_numbers(step, request_bytes)
    base = {"id": _id("chatcmpl-"), "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}
    if include_usage:
        base["usage"] = None

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish,
                                         "logprobs": None}]})

    yield chunk({"role": "assistant", "content": ""})
    if step.say:
        for piece in _pieces(step.say):
            yield chunk({"content": piece})
    for index, call in enumerate(step.calls):
        yield chunk({"tool_calls": [{"index": index, "id": _id("call_"), "type": "function",
                                     "function": {"name": call.name, "arguments": ""}}]})
        for piece in _pieces(json.dumps(call.arguments)):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, step.finish_reason)
    if include_usage:
        yield sse({**base, "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                                    "total_tokens": prompt + completion}})
    yield sse("[DONE]")


# --- OpenAI responses ---

def _response_items(step: Step) -> list[dict]:
    items: list[dict] = []
    if step.say:
        items.append({"type": "message", "id": _id("msg_"), "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": step.say, "annotations": []}]})
    for call in step.calls:
        items.append({"type": "function_call", "id": _id("fc_"), "call_id": _id("call_"), "name": call.name,
                      "arguments": json.dumps(call.arguments), "status": "completed"})
    return items


def response_object(step: Step, model: str, request_bytes: bytes, *, items: list[dict] | None = None,
                    status: str = "completed") -> dict:
    prompt, completion = usage_numbers(step, request_bytes)
    return {"id": _id("resp_"), "object": "response", "created_at": int(time.time()), "status": status,
            "model": model, "output": _response_items(step) if items is None else items,
            "usage": {"input_tokens": prompt, "output_tokens": completion,
                      "total_tokens": prompt + completion,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def response_stream(step: Step, model: str, request_bytes: bytes) -> Iterator[bytes]:
    final = response_object(step, model, request_bytes)
    seq = iter(range(1_000_000))

    def event(kind: str, **fields) -> bytes:
        return sse({"type": kind, "sequence_number": next(seq), **fields}, event=kind)

    started = {**final, "status": "in_progress", "output": [], "usage": None}
    yield event("response.created", response=started)
    for index, item in enumerate(final["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "content": []})
            for piece in _pieces(text):
                yield event("response.output_text.delta", item_id=item["id"], output_index=index,
                            content_index=0, delta=piece)
            yield event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                        text=text)
        else:
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "arguments": ""})
            for piece in _pieces(item["arguments"]):
                yield event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                            delta=piece)
            yield event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                        arguments=item["arguments"])
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=final)


# --- Anthropic messages ---

def _anthropic_blocks(step: Step) -> list[dict]:
    blocks: list[dict] = []
    if step.say:
        blocks.append({"type": "text", "text": step.say})
    for call in step.calls:
        blocks.append({"type": "tool_use", "id": _id("toolu_"), "name": call.name, "input": call.arguments})
    return blocks


def _stop_reason(step: Step) -> str:
    return "tool_use" if step.calls else "end_turn"


def anthropic_message(step: Step, model: str, request_bytes: bytes) -> dict:
    prompt, completion = usage_numbers(step, request_bytes)
    return {"id": _id("msg_"), "type": "message", "role": "assistant", "model": model,
            "content": _anthropic_blocks(step), "stop_reason": _stop_reason(step), "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": completion}}


def anthropic_stream(step: Step, model: str, request_bytes: bytes) -> Iterator[bytes]:
    prompt, completion = usage_numbers(step, request_bytes)
    start = {"id": _id("msg_"), "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": prompt, "output_tokens": 1}}
    yield sse({"type": "message_start", "message": start}, event="message_start")
    for index, block in enumerate(_anthropic_blocks(step)):
        if block["type"] == "text":
            yield sse({"type": "content_block_start", "index": index,
                       "content_block": {"type": "text", "text": ""}}, event="content_block_start")
            for piece in _pieces(block["text"]):
                yield sse({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": piece}}, event="content_block_delta")
        else:
            yield sse({"type": "content_block_start", "index": index,
                       "content_block": {**block, "input": {}}}, event="content_block_start")
            for piece in _pieces(json.dumps(block["input"])):
                yield sse({"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta", "partial_json": piece}},
                          event="content_block_delta")
        yield sse({"type": "content_block_stop", "index": index}, event="content_block_stop")
    yield sse({"type": "message_delta", "delta": {"stop_reason": _stop_reason(step), "stop_sequence": None},
               "usage": {"output_tokens": completion}}, event="message_delta")
    yield sse({"type": "message_stop"}, event="message_stop")
