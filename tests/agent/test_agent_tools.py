"""The agent's MCP tool against a streamable-HTTP MCP server (JSON-RPC initialize, then tools/call with the
session id, answered as server-sent events), and its refusals."""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workers.agent import tools
from workers.agent.config import AgentConfig


@contextlib.contextmanager
def mcp_server():
    seen: list[tuple[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            message = json.loads(self.rfile.read(int(self.headers["content-length"])))
            seen.append((message["method"], self.headers.get("mcp-session-id", "")))
            if message["method"] == "notifications/initialized":
                self.send_response(202)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            if message["method"] == "initialize":
                body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"capabilities": {}}})
                self.send_response(200)
                self.send_header("mcp-session-id", "sess-1")
                self.send_header("content-type", "application/json")
            else:
                args = message["params"]["arguments"]
                result = {"content": [{"type": "text", "text": f"{args['n']} open tickets"}]}
                body = "event: message\ndata: " + json.dumps({"jsonrpc": "2.0", "id": message["id"],
                                                              "result": result}) + "\n\n"
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
            data = body.encode()
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def _config(tmp_path, servers) -> AgentConfig:
    return AgentConfig(base_url="http://127.0.0.1:1/v1", model="m", api_key="k", workspace=tmp_path,
                       http_timeout=10, mcp_servers=servers)


def test_mcp_call_initializes_then_calls_the_tool_in_the_session(tmp_path):
    with mcp_server() as (url, seen):
        config = _config(tmp_path, {"tickets": url})
        assert any(s["function"]["name"] == "mcp_call" for s in tools.tool_specs(config))
        answer = tools.run_tool(config, "mcp_call", json.dumps(
            {"server": "tickets", "tool": "count", "arguments": {"n": 42}}))
    assert answer == "42 open tickets"
    assert seen == [("initialize", ""), ("notifications/initialized", "sess-1"), ("tools/call", "sess-1")]


def test_mcp_refusals_are_results(tmp_path):
    config = _config(tmp_path, {})
    assert all(s["function"]["name"] != "mcp_call" for s in tools.tool_specs(config))
    call = '{"server": "x", "tool": "y"}'
    assert tools.run_tool(config, "mcp_call", call) == "REFUSED: no tool named 'mcp_call'"
    config = _config(tmp_path, {"tickets": "http://127.0.0.1:1/mcp"})
    assert tools.run_tool(config, "mcp_call", '{"server": "other", "tool": "y"}').startswith(
        "REFUSED: no MCP server named 'other'")
    assert tools.run_tool(config, "mcp_call", '{"server": "tickets", "tool": "y"}').startswith(
        "FAILED to call MCP server tickets")
    assert tools.run_tool(config, "nope", "{}") == "REFUSED: no tool named 'nope'"
    assert tools.run_tool(config, "read_file", "[1]") == (
        "REFUSED: the arguments for read_file must be an object")
    assert tools.run_tool(config, "read_file", '{"file": "x"}').startswith(
        "REFUSED: wrong arguments for read_file")
