"""MCP JSON-RPC facts: method and tool per message, batches, and bodies refused as unreadable."""

from __future__ import annotations

import pytest
from roster_gateway.mcp import MalformedBody, McpCall, mcp_calls

JSON = "application/json"
CASES = [
    ("tool call", JSON, b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search"}}',
     (McpCall("tools/call", "search"),)),
    ("list", JSON, b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', (McpCall("tools/list", None),)),
    ("notification", JSON, b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
     (McpCall("notifications/initialized", None),)),
    ("batch", JSON, b'[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}},'
                    b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b"}}]',
     (McpCall("tools/call", "a"), McpCall("tools/call", "b"))),
    ("response to server", JSON, b'{"jsonrpc":"2.0","id":1,"result":{}}', (McpCall("", None),)),
    ("ordinary json", JSON, b'{"model":"x","messages":[]}', ()),
    ("not json at all", "text/plain", b"hello", ()),
    ("empty", JSON, b"", ()),
    ("unlabelled json-rpc", "text/plain",
     b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}',
     (McpCall("tools/call", "x"),)),
]


@pytest.mark.parametrize("name,ctype,body,expected", CASES, ids=[c[0] for c in CASES])
def test_mcp_facts(name, ctype, body, expected):
    assert mcp_calls(ctype, body) == expected


MALFORMED = [
    ("duplicate name hides a tool", JSON,
     b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"safe","name":"delete_all"}}'),
    ("duplicate method", JSON,
     b'{"jsonrpc":"2.0","method":"tools/list","method":"tools/call","params":{"name":"x"}}'),
    ("labelled json that does not parse", JSON, b'{"jsonrpc":"2.0",'),
    ("trailing garbage", "text/plain", b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}} xx'),
    ("tools/call without a name", JSON, b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}'),
    ("batch with a non-object", JSON, b'[{"jsonrpc":"2.0","method":"tools/list"}, 5]'),
    ("wrong jsonrpc version", JSON, b'{"jsonrpc":"1.0","method":"tools/list"}'),
    ("bom", JSON, '\ufeff{"jsonrpc":"2.0","method":"tools/list"}'.encode()),
    ("NaN constant", JSON, b'{"jsonrpc":"2.0","method":"tools/list","id":NaN}'),
    ("not utf-8", JSON, b'{"jsonrpc":"2.0","method":"\xff"}'),
    ("non-string method", JSON, b'{"jsonrpc":"2.0","method":5}'),
    # A tool call hidden from the gateway but read by a lenient server (JS JSON.parse, iconv BOM strip,
    # the MCP SDK's includes("application/json")): must be refused, not treated as an ordinary body.
    ("bom behind a non-json media type", "text/plain; x=application/json",
     '\ufeff{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}'.encode()),
    ("bom, unlabelled", "text/plain",
     '\ufeff{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}'.encode()),
    ("escaped jsonrpc key and nesting too deep for python", "text/plain",
     b'{"\\u006asonrpc":"2.0","method":"tools/call","params":{"name":"x","a":' + b"[" * 5000 + b"]" * 5000
     + b"}}"),
]


@pytest.mark.parametrize("name,ctype,body", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_unreadable_bodies_are_refused(name, ctype, body):
    with pytest.raises(MalformedBody):
        mcp_calls(ctype, body)
