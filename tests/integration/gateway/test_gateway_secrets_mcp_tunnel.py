"""Secrets swapped in transit only toward the host their grant names; MCP tools judged; tunnels pass
through uninspected; model inputs traced byte-exactly before they are sent."""

from __future__ import annotations

import json
import ssl

import httpx
import pytest

from controlplane.audit.models import AuditRecord, ModelTrace
from tests.integration.gateway.conftest import SECRET_VALUE, box_client, deny_body, grant

pytestmark = pytest.mark.integration
JSON = {"content-type": "application/json"}


def test_sentinel_is_swapped_at_the_upstream_and_never_returned_to_the_box(stack, token, secret):
    grant("keyed", stack.https, host="localhost", secret=secret)
    with box_client(stack.gateway, token) as box:
        response = box.get(stack.https.url("/v1/models", host="localhost"),
                           headers={"x-api-key": secret.sentinel})
    assert response.status_code == 200, response.text
    [seen] = stack.https.requests
    assert seen["headers"]["x-api-key"] == SECRET_VALUE
    assert SECRET_VALUE not in response.text and SECRET_VALUE not in stack.gateway.log_text()


def test_injected_header_carries_the_secret(stack, token, secret):
    grant("injected", stack.http, secret=secret, inject_header="authorization",
          inject_format="Bearer {secret}")
    with box_client(stack.gateway, token) as box:
        response = box.get(stack.http.url("/v1/chat"))
    assert response.status_code == 200
    assert stack.http.requests[0]["headers"]["authorization"] == f"Bearer {SECRET_VALUE}"


@pytest.mark.parametrize("other_has_grant", [True, False], ids=["other host granted", "other host ungranted"])
def test_sentinel_toward_another_host_is_a_tripwire_and_the_secret_never_leaves(stack, token, secret,
                                                                              other_has_grant):
    grant("keyed", stack.http, secret=secret)
    if other_has_grant:
        grant("other-plain", stack.other)  # a grant for the host, but not naming the secret
    with box_client(stack.gateway, token) as box:
        response = box.get(stack.other.url("/exfil"), headers={"authorization": f"Bearer {secret.sentinel}"})
    assert response.status_code == 403
    assert deny_body(response)["reason"] == "tripwire"
    assert stack.other.requests == [] and stack.http.requests == []
    assert AuditRecord.objects.filter(kind="tripwire").exists()
    assert SECRET_VALUE not in response.text


def _mcp(tool: str, batch: bool = False) -> bytes:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
    return json.dumps([message] if batch else message).encode()


@pytest.mark.parametrize("tool,batch,allowed", [("search", False, True), ("search", True, True),
                                                 ("delete_repo", False, False), ("delete_repo", True, False)])
def test_mcp_tool_allowed_and_denied(stack, token, tool, batch, allowed):
    grant("mcp-search", stack.http, methods=["POST"], paths=["/mcp"], mcp_tools=["search"])
    with box_client(stack.gateway, token) as box:
        response = box.post(stack.http.url("/mcp"), content=_mcp(tool, batch),
                            headers={"content-type": "application/json", "accept": "application/json"})
    if allowed:
        assert response.status_code == 200, response.text
        assert len(stack.http.requests) == 1
    else:
        assert response.status_code == 403, response.text
        assert stack.http.requests == []


def test_mcp_duplicate_key_smuggling_is_refused(stack, token):
    grant("mcp-search", stack.http, methods=["POST"], paths=["/mcp"], mcp_tools=["search"])
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","name":"delete_repo"}}'
    with box_client(stack.gateway, token) as box:
        response = box.post(stack.http.url("/mcp"), content=body, headers=JSON)
    assert response.status_code == 400 and deny_body(response)["reason"] == "malformed_request"
    assert stack.http.requests == []


def test_model_input_is_traced_byte_exactly_before_it_is_sent(stack, token):
    grant("model", stack.http, trace=True, methods=["POST"])
    body = b'{"messages": [{"role": "user", "content": "caf\xc3\xa9 \\u0000"}]}\n'
    with box_client(stack.gateway, token) as box:
        response = box.post(stack.http.url("/v1/chat"), content=body, headers=JSON)
    assert response.status_code == 200
    trace = ModelTrace.objects.get()
    assert bytes(trace.body) == body == stack.http.requests[0]["body"]


def test_tunnel_grant_passes_through_without_interception(stack, token):
    grant("pinned", stack.https, tunnel=True, schemes=[])
    upstream_only = ssl.create_default_context(cafile=str(stack.ca.cert_path))
    with box_client(stack.gateway, token, verify=upstream_only) as box:
        response = box.get(stack.https.url("/pinned"))
    # The box verified the upstream's own certificate: nothing in between terminated TLS.
    assert response.status_code == 200, response.text
    assert [r["path"] for r in stack.https.requests] == ["/pinned"]


def test_without_a_tunnel_grant_https_is_intercepted(stack, token):
    grant("tls", stack.https)
    upstream_only = ssl.create_default_context(cafile=str(stack.ca.cert_path))
    with box_client(stack.gateway, token, verify=upstream_only) as box, pytest.raises(httpx.ConnectError):
        box.get(stack.https.url("/pinned"))
    assert stack.https.requests == []
