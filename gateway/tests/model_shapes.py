"""Real-shaped model responses (field for field as the providers send them, ids shortened): OpenAI chat
completions plain and streamed, the Responses API plain and streamed, Anthropic Messages plain and
streamed, Gemini's generateContent plain and streamed (SSE, and the JSON array without alt=sse). Each
builder takes the counts so tables can vary them."""

from __future__ import annotations

import json


def _sse(events: list[tuple[str | None, object]]) -> bytes:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def chat_usage(prompt=19, completion=10, cached=0, reasoning=0) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


def chat_json(model="gpt-4o-2024-08-06", **counts) -> bytes:
    return json.dumps({
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion", "created": 1741569952,
        "model": model, "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there!",
                                                             "refusal": None, "annotations": []},
                                     "logprobs": None, "finish_reason": "stop"}],
        "usage": chat_usage(**counts), "service_tier": "default", "system_fingerprint": "fp_fc9f1d7035",
    }, indent=2).encode()


def _chunk(model, choices, usage_field=True, usage=None) -> dict:
    doc = {"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1694268190, "model": model,
           "system_fingerprint": "fp_44709d6fcb", "choices": choices}
    if usage_field:
        doc["usage"] = usage
    return doc


def chat_sse(model="gpt-4o-mini", *, include_usage=True, usage_on_content=False, done=True,
             words=("Hel", "lo", "!"), **counts) -> bytes:
    """A streamed chat completion. With include_usage every chunk has `"usage":null` and a last chunk
    with `"choices":[]` carries it; `usage_on_content`: a provider that puts usage on the final content
    chunk instead (non-empty choices)."""
    events = [(None, _chunk(model, [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                     "logprobs": None, "finish_reason": None}], include_usage))]
    for word in words:
        events.append((None, _chunk(model, [{"index": 0, "delta": {"content": word}, "logprobs": None,
                                             "finish_reason": None}], include_usage)))
    last = [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]
    if usage_on_content:
        events.append((None, _chunk(model, last, True, chat_usage(**counts))))
    else:
        events.append((None, _chunk(model, last, include_usage)))
        if include_usage:
            events.append((None, _chunk(model, [], True, chat_usage(**counts))))
    if done:
        events.append((None, "[DONE]"))
    return _sse(events)


def responses_usage(input=36, output=87, cached=0, reasoning=0) -> dict:
    return {"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output, "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input + output}


def _response(model, status, usage, text="Hi!") -> dict:
    return {"id": "resp_67ccd2bed1ec8190", "object": "response", "created_at": 1741476542, "status": status,
            "error": None, "incomplete_details": None, "instructions": None, "max_output_tokens": None,
            "model": model, "output": [] if usage is None else [
                {"type": "message", "id": "msg_67ccd2bf17f0", "status": "completed", "role": "assistant",
                 "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "parallel_tool_calls": True, "store": True, "temperature": 1.0, "usage": usage}


def responses_json(model="gpt-4.1-2025-04-14", **counts) -> bytes:
    return json.dumps(_response(model, "completed", responses_usage(**counts))).encode()


def responses_sse(model="o4-mini-2025-04-16", *, complete=True, **counts) -> bytes:
    events = [("response.created", {"type": "response.created", "sequence_number": 0,
                                    "response": _response(model, "in_progress", None)}),
              ("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 1,
                                              "item_id": "msg_1", "output_index": 0, "content_index": 0,
                                              "delta": "Hi!"})]
    if complete:
        events.append(("response.completed", {"type": "response.completed", "sequence_number": 2,
                                              "response": _response(model, "completed",
                                                                    responses_usage(**counts))}))
    return _sse(events)


def _cache_creation(cache_write: int, cache_write_1h: int | None) -> dict:
    """The split of cache writes by lifetime, as newer responses carry it (None: an older response)."""
    if cache_write_1h is None:
        return {}
    return {"cache_creation": {"ephemeral_5m_input_tokens": cache_write - cache_write_1h,
                               "ephemeral_1h_input_tokens": cache_write_1h}}


def anthropic_json(model="claude-sonnet-4-20250514", input=2095, output=503, cache_read=0,
                   cache_write=0, cache_write_1h=None) -> bytes:
    return json.dumps({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": "Hello!"}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": input, "cache_creation_input_tokens": cache_write,
                  "cache_read_input_tokens": cache_read, **_cache_creation(cache_write, cache_write_1h),
                  "output_tokens": output, "service_tier": "standard"},
    }).encode()


def anthropic_sse(model="claude-sonnet-4-20250514", input=25, output=15, cache_read=0, cache_write=0,
                  complete=True, cache_write_1h=None) -> bytes:
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant",
            "content": [], "model": model, "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": input, "cache_creation_input_tokens": cache_write,
                      "cache_read_input_tokens": cache_read, **_cache_creation(cache_write, cache_write_1h),
                      "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Hello"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ]
    if complete:
        events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                                          "stop_sequence": None},
                                      "usage": {"output_tokens": output}}),
                   ("message_stop", {"type": "message_stop"})]
    return _sse(events)


# --- Gemini generateContent ---

def gemini_usage(prompt=8, candidates=20, cached=0, thoughts=0, tool_prompt=0, total=None) -> dict:
    meta = {"promptTokenCount": prompt, "candidatesTokenCount": candidates,
            "totalTokenCount": prompt + candidates + thoughts + tool_prompt if total is None else total,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]}
    if cached:
        meta["cachedContentTokenCount"] = cached
        meta["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": cached}]
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    if tool_prompt:
        meta["toolUsePromptTokenCount"] = tool_prompt
    return meta


def _gemini_part(text: str, finish: str | None, usage: dict, model: str) -> dict:
    candidate: dict = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model,
            "responseId": "mXk3aKbBNui5nvgPq5KhuQo"}


def gemini_json(model="gemini-2.5-flash", **counts) -> bytes:
    return json.dumps(_gemini_part("Hello there!", "STOP", gemini_usage(**counts), model), indent=2).encode()


def _gemini_parts(model: str, counts: dict) -> list[dict]:
    """As Gemini streams: every piece carries usageMetadata, the prompt's count from the first, the
    candidates' (and thoughts') only once known; the last piece holds the call's whole usage."""
    prompt = counts.get("prompt", 8)
    early = {"promptTokenCount": prompt, "totalTokenCount": prompt,
             "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]}
    return [_gemini_part("Hello", None, early, model), _gemini_part(" there", None, early, model),
            _gemini_part("!", "STOP", gemini_usage(**counts), model)]


def gemini_sse(model="gemini-2.5-flash", crlf=True, **counts) -> bytes:
    """alt=sse: `data:` events only, ended with CRLF CRLF as Google's servers send them."""
    end = "\r\n\r\n" if crlf else "\n\n"
    return "".join("data: " + json.dumps(p, separators=(",", ":")) + end
                   for p in _gemini_parts(model, counts)).encode()


def gemini_array(model="gemini-2.5-flash", **counts) -> bytes:
    """Without alt=sse: one JSON array of the same pieces, pretty-printed and comma-separated by line."""
    return ("[" + "\n,\r\n".join(json.dumps(p, indent=2) for p in _gemini_parts(model, counts))
            + "]").encode()
