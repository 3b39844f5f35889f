"""The script a scripted model follows, and where a conversation is in it.

A script file is JSON:

    {"model": "roster-scripted",
     "steps": [
       {"tool": "fetch_url", "arguments": {"url": "http://127.0.0.1:18092/notes.txt"}},
       {"tools": [{"name": "read_file", "arguments": {"path": "a.txt"}},
                  {"name": "write_file", "arguments": {"path": "b.txt", "content": "x"}}]},
       {"say": "Here is what I found."}
     ]}

Step N answers the request whose conversation already holds N model turns, so the server keeps no state
between requests and two conversations never disturb each other. A step says text (`say`), calls tools
(`tool` + `arguments`, or `tools`), or both. Past the last step the model says the script is over."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

END_OF_SCRIPT = "The script is over; nothing more to do."


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict


@dataclass(frozen=True)
class Step:
    say: str = ""
    calls: tuple[ToolCall, ...] = field(default_factory=tuple)

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.calls else "stop"


@dataclass(frozen=True)
class Script:
    model: str
    steps: tuple[Step, ...]

    def step(self, turns_so_far: int) -> Step:
        if 0 <= turns_so_far < len(self.steps):
            return self.steps[turns_so_far]
        return Step(say=END_OF_SCRIPT)


class ScriptError(ValueError):
    """The script file is not a script (named field, what is wrong)."""


def _call(raw: object, where: str) -> ToolCall:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise ScriptError(f"{where}: a tool call needs a non-empty name")
    arguments = raw.get("arguments", {})
    if not isinstance(arguments, dict):
        raise ScriptError(f"{where}: arguments must be an object")
    return ToolCall(name=raw["name"], arguments=arguments)


def _step(raw: object, index: int) -> Step:
    where = f"steps[{index}]"
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: a step is an object")
    unknown = set(raw) - {"say", "tool", "arguments", "tools"}
    if unknown:
        raise ScriptError(f"{where}: unknown keys {sorted(unknown)}")
    say = raw.get("say", "")
    if not isinstance(say, str):
        raise ScriptError(f"{where}: say must be text")
    calls: list[ToolCall] = []
    if "tool" in raw:
        calls.append(_call({"name": raw["tool"], "arguments": raw.get("arguments", {})}, where))
    for n, call in enumerate(raw.get("tools", [])):
        calls.append(_call(call, f"{where}.tools[{n}]"))
    if not say and not calls:
        raise ScriptError(f"{where}: a step says something or calls a tool")
    return Step(say=say, calls=tuple(calls))


def script_parse(data: object) -> Script:
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list) or not data["steps"]:
        raise ScriptError("a script is an object with a non-empty list of steps")
    model = data.get("model", "roster-scripted")
    if not isinstance(model, str):
        raise ScriptError("model must be text")
    return Script(model=model, steps=tuple(_step(raw, i) for i, raw in enumerate(data["steps"])))


def script_load(path: Path) -> Script:
    try:
        return script_parse(json.loads(Path(path).read_text()))
    except json.JSONDecodeError as exc:
        raise ScriptError(f"{path}: not JSON: {exc}") from exc


# --- how many model turns a conversation already holds, per wire format ---

def chat_turns(body: dict) -> int:
    """OpenAI chat completions and Anthropic messages: the assistant messages sent back."""
    messages = body.get("messages") or []
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


_MODEL_ITEMS = {"function_call", "reasoning"}


def responses_turns(body: dict) -> int:
    """OpenAI responses: runs of consecutive model-produced items (assistant messages, function calls)."""
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    turns, inside = 0, False
    for item in items:
        produced = isinstance(item, dict) and (
            item.get("type") in _MODEL_ITEMS or item.get("role") == "assistant")
        if produced and not inside:
            turns += 1
        inside = produced
    return turns


def estimate_tokens(text: str | bytes) -> int:
    """A fixed, deterministic count (about four characters a token), so tests can predict usage."""
    return max(1, len(text) // 4)
