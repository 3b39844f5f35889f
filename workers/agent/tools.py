"""The agent's tools. Every one returns text for the model; none raises. What leaves the box goes through
the gateway, which decides: a refusal comes back to the model as a legible result, never as a crash."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from workers.agent import net
from workers.agent.config import AgentConfig

MAX_FILE_CHARS = 20000
MCP_PROTOCOL = "2025-03-26"


def _spec(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required,
                       "additionalProperties": False}}}


def tool_specs(config: AgentConfig) -> list[dict]:
    text = {"type": "string"}
    specs = [
        _spec("fetch_url", "GET a URL through the Roster gateway; refusals are reported, not raised.",
              {"url": text}, ["url"]),
        _spec("read_file", "Read a text file in the workspace.", {"path": text}, ["path"]),
        _spec("write_file", "Write a text file in the workspace (replaces it).",
              {"path": text, "content": text}, ["path", "content"]),
        _spec("propose", "Propose a consequential action for a human (or an admin's rule) to approve; the "
              "box never acts itself. kind: webhook | email | git_push | identity_edit | follow_up; "
              "destination: a name the admin defined (none for follow_up); payload: by kind (webhook: any "
              "object; email: to, subject, body; follow_up: task, work for a later run of yours).",
              {"kind": text, "destination": text, "payload": {"type": "object"}, "reason": text},
              ["kind", "payload"]),
        _spec("proposal_status", "The current state of a proposal you made (pending, approved, refused, "
              "expired, executing, executed, failed).", {"proposal_id": text}, ["proposal_id"]),
    ]
    if config.mcp_servers:
        specs.append(_spec(
            "mcp_call", "Call a tool of an MCP server. Servers: " + ", ".join(sorted(config.mcp_servers)),
            {"server": text, "tool": text, "arguments": {"type": "object"}}, ["server", "tool"]))
    return specs


def _excerpt(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters]"


def fetch_url(config: AgentConfig, url: str) -> str:
    try:
        reply = net.send("GET", url, timeout=config.http_timeout)
    except net.NetworkFailure as exc:
        return f"FAILED to fetch {url}: {exc}"
    refusal = reply.refusal
    if refusal is not None:
        return refusal.describe()
    body = _excerpt(reply.text(), config.fetch_max_chars)
    return f"HTTP {reply.status} from {url}:\n{body}"


def _workspace_path(config: AgentConfig, path: str) -> Path | None:
    root = config.workspace.resolve()
    target = (root / path).resolve()
    return target if target == root or root in target.parents else None


def read_file(config: AgentConfig, path: str) -> str:
    target = _workspace_path(config, path)
    if target is None:
        return f"REFUSED: {path} is outside the workspace"
    try:
        return _excerpt(target.read_text(errors="replace"), MAX_FILE_CHARS)
    except OSError as exc:
        return f"FAILED to read {path}: {exc.strerror or exc}"


def write_file(config: AgentConfig, path: str, content: str) -> str:
    target = _workspace_path(config, path)
    if target is None:
        return f"REFUSED: {path} is outside the workspace"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    except OSError as exc:
        return f"FAILED to write {path}: {exc.strerror or exc}"
    return f"wrote {len(content)} characters to {path}"


def propose(config: AgentConfig, kind: str, payload: object, destination: str = "", reason: str = "") -> str:
    """POST to the gateway's reserved proposals name (docs/proposals.md); the run is the proxy token's."""
    proposal: dict = {"kind": kind, "payload": payload}
    if destination:
        proposal["destination"] = destination
    if reason:
        proposal["reason"] = reason
    body = json.dumps(proposal).encode()
    try:
        reply = net.send("POST", config.proposals_url, headers={"Content-Type": "application/json"},
                         body=body, timeout=config.http_timeout)
    except net.NetworkFailure as exc:
        return f"proposals are unavailable: {exc}"
    if reply.ok:
        return f"proposal recorded (HTTP {reply.status}): {_excerpt(reply.text(), 2000)}"
    refusal = reply.refusal  # a gateway deny: the proposals name is not served here
    if refusal is not None or reply.status >= 500:
        why = refusal.describe() if refusal else f"HTTP {reply.status}"
        return f"proposals are unavailable: {why}"
    try:
        answer = reply.json()
        why = f"{answer.get('error')}: {answer.get('message')}"
    except (ValueError, AttributeError):
        why = _excerpt(reply.text(), 300)
    return f"proposal REFUSED (HTTP {reply.status}) {why}"


def proposal_status(config: AgentConfig, proposal_id: str) -> str:
    """GET the proposal's state from the reserved name; only the run that made it can see it."""
    proposal_id = proposal_id.strip().lower()
    if not proposal_id or len(proposal_id) > 36 or not set(proposal_id) <= set("0123456789abcdef-"):
        return f"REFUSED: {proposal_id!r} is not a proposal id"
    try:
        reply = net.send("GET", f"{config.proposals_url.rstrip('/')}/{proposal_id}",
                         timeout=config.http_timeout)
    except net.NetworkFailure as exc:
        return f"proposals are unavailable: {exc}"
    return f"HTTP {reply.status}: {_excerpt(reply.text(), 2000)}"


def _mcp_result(reply: net.Reply) -> object:
    """The JSON-RPC answer, from a JSON body or the first `data:` event of an SSE body."""
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        for line in reply.text().splitlines():
            if line.startswith("data:"):
                return json.loads(line[5:])
        raise ValueError("no data event in the server's stream")
    return reply.json()


def _mcp_post(config: AgentConfig, url: str, message: dict, session: str) -> net.Reply:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
    return net.send("POST", url, headers=headers, body=json.dumps(message).encode(),
                    timeout=config.http_timeout)


def mcp_call(config: AgentConfig, server: str, tool: str, arguments: dict | None = None) -> str:
    url = config.mcp_servers.get(server)
    if url is None:
        return f"REFUSED: no MCP server named {server!r} (known: {', '.join(sorted(config.mcp_servers))})"
    try:
        hello = _mcp_post(config, url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": MCP_PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "roster-agent", "version": "1"}}}, "")
        if not hello.ok:
            return _mcp_failure(hello, "initialize")
        session = hello.headers.get("mcp-session-id", "")
        _mcp_post(config, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        reply = _mcp_post(config, url, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                        "params": {"name": tool, "arguments": arguments or {}}}, session)
        if not reply.ok:
            return _mcp_failure(reply, f"tools/call {tool}")
        answer = _mcp_result(reply)
    except net.NetworkFailure as exc:
        return f"FAILED to call MCP server {server}: {exc}"
    except ValueError as exc:
        return f"FAILED: MCP server {server} answered something unreadable: {exc}"
    if isinstance(answer, dict) and "error" in answer:
        return f"MCP error from {server}.{tool}: {json.dumps(answer['error'])}"
    result = answer.get("result", {}) if isinstance(answer, dict) else {}
    texts = [c.get("text", "") for c in result.get("content", []) if isinstance(c, dict)]
    return _excerpt("\n".join(texts) or json.dumps(result), config.fetch_max_chars)


def _mcp_failure(reply: net.Reply, what: str) -> str:
    refusal = reply.refusal
    return refusal.describe() if refusal else f"FAILED: MCP {what}: HTTP {reply.status}"


ToolFunction = Callable[..., str]
TOOLS: dict[str, ToolFunction] = {"fetch_url": fetch_url, "read_file": read_file, "write_file": write_file,
                                  "propose": propose, "proposal_status": proposal_status,
                                  "mcp_call": mcp_call}


def run_tool(config: AgentConfig, name: str, arguments_json: str) -> str:
    function = TOOLS.get(name)
    if function is None or (name == "mcp_call" and not config.mcp_servers):
        return f"REFUSED: no tool named {name!r}"
    try:
        arguments = json.loads(arguments_json or "{}")
    except ValueError:
        return f"REFUSED: the arguments for {name} are not JSON"
    if not isinstance(arguments, dict):
        return f"REFUSED: the arguments for {name} must be an object"
    try:
        return function(config, **arguments)
    except TypeError as exc:
        return f"REFUSED: wrong arguments for {name}: {exc}"
