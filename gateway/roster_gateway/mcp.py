"""MCP over streamable HTTP: a POST body is one JSON-RPC message or a batch (array) of them.
The gateway reports each message's method and, for tools/call, the tool name."""

from __future__ import annotations

import json
from dataclasses import dataclass


class MalformedBody(Exception):
    """A body the gateway cannot read the same way every server would; refused rather than guessed."""


@dataclass(frozen=True)
class McpCall:
    method: str
    tool: str | None

    def as_wire(self) -> dict:
        return {"method": self.method, "tool": self.tool}


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            # Parsers disagree on which duplicate wins; a smuggled second "name" must not hide a tool.
            raise MalformedBody(f"duplicate JSON key {key!r}")
        seen[key] = value
    return seen


def _reject_constant(name: str) -> object:
    raise MalformedBody(f"non-standard JSON constant {name}")


def parse_json(body: bytes) -> object:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedBody("JSON body is not UTF-8") from exc
    if text.startswith("\ufeff"):
        raise MalformedBody("JSON body starts with a byte-order mark")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant)
    except MalformedBody:
        raise
    except (ValueError, RecursionError) as exc:
        raise MalformedBody("body is labelled JSON but does not parse") from exc


def _is_jsonrpc(message: object) -> bool:
    return isinstance(message, dict) and "jsonrpc" in message


def _call(message: dict) -> McpCall:
    if message.get("jsonrpc") != "2.0":
        raise MalformedBody("JSON-RPC message without jsonrpc 2.0")
    method = message.get("method")
    if method is None:
        if "result" in message or "error" in message:
            return McpCall(method="", tool=None)  # a response the client sends back to the server
        raise MalformedBody("JSON-RPC message has neither method nor result")
    if not isinstance(method, str):
        raise MalformedBody("JSON-RPC method is not a string")
    tool = None
    if method == "tools/call":
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if not isinstance(name, str) or not name:
            raise MalformedBody("tools/call without a tool name")
        tool = name
    return McpCall(method=method, tool=tool)


_BOM = b"\xef\xbb\xbf"


def looks_like_json(content_type: str, body: bytes) -> bool:
    # "json" anywhere in the header: servers test it loosely (the MCP SDK: includes("application/json")).
    if "json" in content_type.lower():
        return True
    head = body.lstrip()
    if head.startswith(_BOM):  # servers that decode through iconv drop a BOM, then parse JSON
        head = head[len(_BOM):].lstrip()
    return head[:1] in (b"{", b"[")


def mcp_calls(content_type: str, body: bytes) -> tuple[McpCall, ...]:
    """The JSON-RPC messages in a request body; () when the body is not JSON-RPC at all. A body that
    looks like JSON but does not parse here is refused, whatever its label: a more lenient server
    (deeper nesting, a BOM, escaped keys hiding "jsonrpc") could still read a tool call in it."""
    if not body or not looks_like_json(content_type, body):
        return ()
    doc = parse_json(body)
    if isinstance(doc, list):
        if not doc:
            return ()
        if any(_is_jsonrpc(m) for m in doc):
            if not all(isinstance(m, dict) for m in doc):
                raise MalformedBody("JSON-RPC batch with a non-object entry")
            return tuple(_call(m) for m in doc)
        return ()
    if _is_jsonrpc(doc):
        return (_call(doc),)
    return ()
