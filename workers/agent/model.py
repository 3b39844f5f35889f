"""One model call: an OpenAI-compatible chat completion, streamed (server-sent events) or whole, turned into
the assistant message (text and tool calls) and the tokens it used."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from workers.agent import net
from workers.agent.config import AgentConfig


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text as the model wrote it


@dataclass
class Turn:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_reported: bool = False

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_message(self) -> dict:
        message: dict = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls]
        return message


class ModelStopped(Exception):
    """The model cannot be asked any more (refused by the gateway, over budget, an error): says why."""

    def __init__(self, why: str, refusal: net.Refusal | None = None):
        super().__init__(why)
        self.refusal = refusal


def _estimate(text: str) -> int:
    return max(1, len(text) // 4)


def _stop_for(status: int, headers: dict[str, str], body: bytes) -> ModelStopped:
    refusal = net.refusal_of(status, headers, body)
    if refusal is not None:
        return ModelStopped(refusal.describe(), refusal)
    detail = body[:300].decode("utf-8", errors="replace").strip()
    if status == 401:
        return ModelStopped(f"the model provider refused the key (HTTP 401): {detail}")
    return ModelStopped(f"the model call failed (HTTP {status}): {detail}")


def _apply_usage(turn: Turn, usage: object) -> None:
    if isinstance(usage, dict):
        turn.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        turn.completion_tokens = int(usage.get("completion_tokens") or 0)
        turn.usage_reported = True


def _read_stream(lines) -> Turn:
    turn = Turn()
    calls: dict[int, ToolCall] = {}
    for raw in lines:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            _apply_usage(turn, chunk["usage"])
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            turn.content += delta.get("content") or ""
            for part in delta.get("tool_calls") or []:
                call = calls.setdefault(int(part.get("index", 0)), ToolCall(id="", name="", arguments=""))
                call.id = part.get("id") or call.id
                function = part.get("function") or {}
                call.name += function.get("name") or ""
                call.arguments += function.get("arguments") or ""
            turn.finish_reason = choice.get("finish_reason") or turn.finish_reason
    turn.tool_calls = [calls[i] for i in sorted(calls)]
    return turn


def _read_whole(body: dict) -> Turn:
    turn = Turn()
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    turn.content = message.get("content") or ""
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        turn.tool_calls.append(ToolCall(id=call.get("id", ""), name=function.get("name", ""),
                                        arguments=function.get("arguments") or "{}"))
    turn.finish_reason = choice.get("finish_reason") or ""
    _apply_usage(turn, body.get("usage"))
    return turn


def chat(config: AgentConfig, messages: list[dict], tools: list[dict], max_tokens: int) -> Turn:
    payload: dict = {"model": config.model, "messages": messages, "max_tokens": max_tokens}
    if tools:
        payload["tools"] = tools
    if config.stream:
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
    body = json.dumps(payload).encode()
    headers = {"Authorization": f"Bearer {config.api_key}", "Content-Type": "application/json",
               "Accept": "text/event-stream" if config.stream else "application/json"}
    url = config.base_url + "/chat/completions"
    try:
        if config.stream:
            stream = net.open_stream(url, headers=headers, body=body, timeout=config.http_timeout)
            if not 200 <= stream.status < 300:
                raise _stop_for(stream.status, stream.headers, stream.body)
            try:
                turn = _read_stream(stream.lines)
            finally:
                stream.close()
        else:
            reply = net.send("POST", url, headers=headers, body=body, timeout=config.http_timeout)
            if not reply.ok:
                raise _stop_for(reply.status, reply.headers, reply.body)
            turn = _read_whole(reply.json())
    except net.NetworkFailure as exc:
        raise ModelStopped(f"the model could not be reached: {exc}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelStopped(f"the model's answer could not be read: {exc.__class__.__name__}: {exc}") from exc
    if not turn.usage_reported:  # count something: the token bound must hold even without usage
        turn.prompt_tokens = _estimate(body.decode())
        turn.completion_tokens = _estimate(turn.content + "".join(c.arguments for c in turn.tool_calls))
    return turn
