"""Reading a journaled call in its wire format (docs/journal.md): what a request adds to the conversation
(the system text, user turns, tool results) and what the model answered (content, reasoning, tool calls,
exactly as returned), for OpenAI chat completions, the Responses API and Anthropic Messages, as JSON or
as an event stream. Only reads: nothing here decides anything."""

from __future__ import annotations

import json

CHAT, RESPONSES, MESSAGES = "chat", "responses", "messages"


def api_of(url: str) -> str:
    path = url.split("?", 1)[0].rstrip("/")
    if path.endswith("/chat/completions"):
        return CHAT
    if path.endswith("/responses"):
        return RESPONSES
    if path.endswith("/messages"):
        return MESSAGES
    return ""


def conversation(api: str, doc: dict) -> tuple[object, list]:
    """(system text or None, the list of messages/items) of a parsed request."""
    if api == MESSAGES:
        return doc.get("system"), list(doc.get("messages") or [])
    if api == RESPONSES:
        items = doc.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
        return doc.get("instructions"), items
    messages = list(doc.get("messages") or [])
    system = [m.get("content") for m in messages
              if isinstance(m, dict) and m.get("role") in ("system", "developer")]
    return (system[0] if len(system) == 1 else system or None), messages


def from_model(api: str, item: object) -> bool:
    """Whether a history item repeats what the model said (its answer is recorded from the response)."""
    if not isinstance(item, dict):
        return False
    if api == RESPONSES:
        return item.get("role") == "assistant" or item.get("type") in ("function_call", "reasoning")
    return item.get("role") == "assistant"


def inputs(api: str, item: object) -> list[dict]:
    """The records one new history item stands for: user turns and tool results (untyped otherwise)."""
    if not isinstance(item, dict) or from_model(api, item):
        return []
    if api == CHAT:
        if item.get("role") == "tool":
            return [{"type": "tool_result", "tool_call_id": item.get("tool_call_id"),
                     "content": item.get("content")}]
        if item.get("role") in ("system", "developer"):
            return []
        return [{"type": "user_turn", "role": item.get("role"), "content": item.get("content")}]
    if api == RESPONSES:
        if item.get("type") == "function_call_output":
            return [{"type": "tool_result", "tool_call_id": item.get("call_id"),
                     "content": item.get("output")}]
        if item.get("role") in ("system", "developer"):
            return []
        return [{"type": "user_turn", "role": item.get("role", "user"), "content": item.get("content")}]
    content = item.get("content")
    if not isinstance(content, list):
        return [{"type": "user_turn", "role": item.get("role"), "content": content}]
    out, rest = [], []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            out.append({"type": "tool_result", "tool_call_id": block.get("tool_use_id"),
                        "content": block.get("content"), "is_error": bool(block.get("is_error"))})
        else:
            rest.append(block)
    if rest:
        out.insert(0, {"type": "user_turn", "role": item.get("role"), "content": rest})
    return out


def _events(body: bytes) -> list[dict]:
    out = []
    for line in body.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if not data or data == "[DONE]":
            continue
        try:
            doc = json.loads(data)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def answer(api: str, body: bytes, streamed: bool) -> dict:
    """{"content", "reasoning", "tool_calls"} as the model returned them (strings joined from deltas)."""
    if streamed:
        return _STREAMED[api](_events(body)) if api in _STREAMED else {}
    try:
        doc = json.loads(body)
    except ValueError:
        return {}
    return _JSON[api](doc) if isinstance(doc, dict) and api in _JSON else {}


def _turn(content: str = "", reasoning: str = "", tool_calls: list | None = None) -> dict:
    return {"content": content, "reasoning": reasoning, "tool_calls": tool_calls or []}


def _chat_json(doc: dict) -> dict:
    choices = doc.get("choices") or [{}]
    message = (choices[0] or {}).get("message") or {}
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    return _turn(message.get("content") or "", reasoning, message.get("tool_calls") or [])


def _chat_sse(events: list[dict]) -> dict:
    content, reasoning, calls = [], [], {}
    for event in events:
        for choice in event.get("choices") or []:
            if (choice or {}).get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            content.append(delta.get("content") or "")
            reasoning.append(delta.get("reasoning_content") or delta.get("reasoning") or "")
            for piece in delta.get("tool_calls") or []:
                call = calls.setdefault(piece.get("index", 0), {"id": None, "type": "function",
                                                                "function": {"name": "", "arguments": ""}})
                call["id"] = piece.get("id") or call["id"]
                function = piece.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
    return _turn("".join(content), "".join(reasoning), [calls[i] for i in sorted(calls)])


def _function_call(item: dict) -> dict:
    return {"id": item.get("call_id"), "name": item.get("name"), "arguments": item.get("arguments")}


def _responses_json(doc: dict) -> dict:
    content, reasoning, calls = [], [], []
    for item in doc.get("output") or []:
        kind = (item or {}).get("type")
        if kind == "message":
            content += [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
        elif kind == "reasoning":
            reasoning += [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)]
        elif kind == "function_call":
            calls.append(_function_call(item))
    return _turn("".join(content), "".join(reasoning), calls)


def _responses_sse(events: list[dict]) -> dict:
    for event in events:
        if event.get("type") in ("response.completed", "response.incomplete", "response.failed"):
            return _responses_json(event.get("response") or {})
    content = [e.get("delta", "") for e in events if e.get("type") == "response.output_text.delta"]
    reasoning = [e.get("delta", "") for e in events
                 if e.get("type") == "response.reasoning_summary_text.delta"]
    calls = [_function_call(e["item"]) for e in events if e.get("type") == "response.output_item.done"
             and (e.get("item") or {}).get("type") == "function_call"]
    return _turn("".join(content), "".join(reasoning), calls)


def _messages_json(doc: dict) -> dict:
    content, reasoning, calls = [], [], []
    for block in doc.get("content") or []:
        kind = (block or {}).get("type")
        if kind == "text":
            content.append(block.get("text", ""))
        elif kind == "thinking":
            reasoning.append(block.get("thinking", ""))
        elif kind == "tool_use":
            calls.append({"id": block.get("id"), "name": block.get("name"), "input": block.get("input")})
    return _turn("".join(content), "".join(reasoning), calls)


def _messages_sse(events: list[dict]) -> dict:
    blocks: dict[int, dict] = {}
    for event in events:
        kind, index = event.get("type"), event.get("index", 0)
        if kind == "content_block_start":
            blocks[index] = dict(event.get("content_block") or {})
            blocks[index]["partial_json"] = ""
        elif kind == "content_block_delta" and index in blocks:
            delta, block = event.get("delta") or {}, blocks[index]
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif delta.get("type") == "input_json_delta":
                block["partial_json"] += delta.get("partial_json", "")
    for block in blocks.values():
        if block.get("type") == "tool_use" and block["partial_json"]:
            try:
                block["input"] = json.loads(block["partial_json"])
            except ValueError:
                block["input"] = block["partial_json"]  # as returned, when it never became JSON
    return _messages_json({"content": [blocks[i] for i in sorted(blocks)]})


_JSON = {CHAT: _chat_json, RESPONSES: _responses_json, MESSAGES: _messages_json}
_STREAMED = {CHAT: _chat_sse, RESPONSES: _responses_sse, MESSAGES: _messages_sse}
