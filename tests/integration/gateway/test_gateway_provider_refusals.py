"""Refusals the agents' SDKs read, through a real mitmdump and the real decision API: the official OpenAI
and Anthropic clients show the model Roster's reason (not "403 status code (no body)") and stop
retrying at once (x-should-retry: false); a WebSocket to a model API is refused legibly and never
reaches the upstream (issue 23 items 4 and 5)."""

from __future__ import annotations

import anthropic
import httpx2
import openai
import pytest

from tests.integration.gateway.conftest import box_client, deny_body, grant, proxy_auth, raw_request

pytestmark = pytest.mark.integration


def _base(stack) -> str:
    return f"http://127.0.0.1:{stack.http.port}/v1"


def test_the_openai_sdk_reads_the_reason_and_does_not_retry(stack, token):
    grant("openai", stack.http, paths=["/v1/models"], wire="openai-chat")
    with box_client(stack.gateway, token) as http:
        client = openai.OpenAI(base_url=_base(stack), api_key="sk-box", http_client=http, max_retries=4)
        with pytest.raises(openai.PermissionDeniedError) as caught:
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    error = caught.value
    assert "Roster refused this request (no_grant)" in str(error) and "no grant matches" in str(error)
    assert error.body["type"] == "roster_no_grant"
    assert error.response.headers["x-should-retry"] == "false"
    assert stack.http.requests == []  # refused once, never retried, never forwarded


def test_the_anthropic_sdk_reads_the_reason_on_a_non_model_path(stack, token):
    grant("anthropic", stack.http, paths=["/v1/messages"], wire="anthropic-messages")
    # This anthropic release speaks through httpx2 (its own fork of httpx), configured as a box would be.
    with httpx2.Client(proxy=stack.gateway.proxy_url_with(token), trust_env=False, timeout=20) as http:
        client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{stack.http.port}", api_key="sk-ant-box",
                                     http_client=http, max_retries=4)
        with pytest.raises(anthropic.PermissionDeniedError) as caught:
            client.models.list()  # GET /v1/models: the host is a model host, the path is not granted
    error = caught.value
    assert error.body["type"] == "error" and error.body["error"]["type"] == "roster_no_grant"
    assert "Roster refused this request (no_grant)" in str(error)
    assert stack.http.requests == []


def test_a_gemini_host_refusal_is_googles_shape(stack, token):
    grant("gemini", stack.http, paths=["/v1beta/models/*"], methods=["POST"], wire="gemini")
    with box_client(stack.gateway, token) as http:
        response = http.get(f"http://127.0.0.1:{stack.http.port}/v1beta/files")
    body = deny_body(response)
    assert response.status_code == 403 and response.headers["x-should-retry"] == "false"
    assert body["error"]["code"] == 403 and body["error"]["status"] == "PERMISSION_DENIED"
    assert body["reason"] == "no_grant" and "no_grant" in body["error"]["message"]


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/socket"], ids=["model path", "model host"])
def test_a_websocket_to_a_model_api_is_refused_legibly(stack, token, path):
    grant("openai", stack.http, wire="openai-responses")  # every path of the host allowed over HTTP
    authority = f"127.0.0.1:{stack.http.port}"
    status, answer = raw_request(stack.gateway, (
        f"GET http://{authority}{path} HTTP/1.1\r\nHost: {authority}\r\n"
        f"Proxy-Authorization: {proxy_auth(token)}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n").encode())
    assert status == 403, answer
    assert b'"protocol_refused"' in answer and b"WebSocket to a model API" in answer
    assert stack.http.requests == []
    with box_client(stack.gateway, token) as http:  # the same host over HTTP is allowed
        assert http.get(f"http://{authority}/v1/socket").status_code == 200
