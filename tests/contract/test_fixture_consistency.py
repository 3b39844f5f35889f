"""Every /decide fixture describes one real request: its body preview is the whole body (they are all
small), body_size and body_sha256 are that body's, and `mcp` lists exactly the body's JSON-RPC calls.
The gateway's tests build the box request from the preview, so an abbreviated fixture would test nothing."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.contract import contract

REQUESTS = {name: contract.load(name)["request"] for name in contract.names()
            if contract.load(name)["endpoint"].endswith("/decide") and contract.load(name)["request"]}


def _calls(body: str) -> list[dict]:
    if not body:
        return []
    try:
        parsed = json.loads(body)
    except ValueError:
        return []
    messages = parsed if isinstance(parsed, list) else [parsed]
    calls = []
    for message in messages:
        if isinstance(message, dict) and message.get("jsonrpc") == "2.0" and "method" in message:
            tool = message.get("params", {}).get("name") if message["method"] == "tools/call" else None
            calls.append({"method": message["method"], "tool": tool})
    return calls


def test_there_are_decide_fixtures():
    assert len(REQUESTS) >= 10


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_body_fields_describe_one_body(name):
    request = REQUESTS[name]
    body = request["body_preview"].encode()
    assert request["body_size"] == len(body), "body_preview must be the whole body"
    assert request["body_sha256"] == (hashlib.sha256(body).hexdigest() if body else "")
    assert request["mcp"] == _calls(request["body_preview"])


def test_the_mcp_fixture_carries_a_real_json_rpc_call():
    request = REQUESTS["decide_allow_mcp"]
    assert json.loads(request["body_preview"])["method"] == "tools/call"
    assert request["mcp"] == [{"method": "tools/call", "tool": "search"}]
