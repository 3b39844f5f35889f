"""Grants that judge headers and body size, through a real mitmdump and the decision API: what the
recording upstream received (docs/grants.md, "Header and body-size conditions"; docs/wire.md)."""

from __future__ import annotations

import json

import pytest

from tests.integration.gateway.conftest import (
    SECRET_VALUE,
    box_client,
    deny_body,
    grant,
    proxy_auth,
    raw_request,
)

pytestmark = pytest.mark.integration

JSON_ONLY = [{"name": "content-type", "equals": "application/json"},
             {"name": "x-http-method-override", "absent": True}]


def body_of(size: int) -> bytes:
    """A JSON body of exactly `size` bytes (the gateway reads JSON bodies, e.g. for MCP calls)."""
    return b'{"a":"' + b"x" * (size - 8) + b'"}'


def _json_only(stack, **fields):
    return grant("json-only", stack.http, methods=["POST"], paths=["/v1/**"], header_conditions=JSON_ONLY,
                 max_body_size=64, **fields)


def test_a_request_meeting_the_conditions_reaches_the_upstream(stack, token):
    _json_only(stack)
    with box_client(stack.gateway, token) as client:
        response = client.post(stack.http.url("/v1/send"), content=body_of(64),
                               headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    [seen] = stack.http.requests
    assert seen["body"] == body_of(64) and seen["headers"]["content-type"] == "application/json"


# (An override naming another method is refused 400 by the gateway before any grant is asked; one naming
# the request's own method passes that check, and the grant's `absent` condition refuses it.)
@pytest.mark.parametrize("headers", [
    {"Content-Type": "application/json", "X-HTTP-Method-Override": "POST"},
    {"Content-Type": "application/json", "x-http-method-override": "post"},
    {"Content-Type": "text/plain"},
    {},
], ids=["forbidden header", "forbidden header, other case", "wrong content type", "no content type"])
def test_a_request_failing_a_condition_is_refused_and_never_reaches_the_upstream(stack, token, headers):
    _json_only(stack)
    with box_client(stack.gateway, token) as client:
        response = client.post(stack.http.url("/v1/send"), content=b"{}", headers=headers)
    body = deny_body(response)
    assert response.status_code == 403 and body["reason"] == "no_grant", body
    assert "grant 'json-only' would, but the request does not meet its condition" in body["message"]
    assert "post" not in body["message"].replace("POST http", "")  # the box's values are never quoted
    assert stack.http.requests == []


def test_a_forbidden_header_sent_twice_in_two_cases_is_refused(stack, token):
    _json_only(stack)
    status, raw = raw_request(stack.gateway, (
        f"POST http://127.0.0.1:{stack.http.port}/v1/send HTTP/1.1\r\nHost: 127.0.0.1:{stack.http.port}\r\n"
        f"Proxy-Authorization: {proxy_auth(token)}\r\nContent-Type: application/json\r\n"
        "x-http-method-override: POST\r\nX-HTTP-Method-Override: post\r\n"
        "Content-Length: 2\r\n\r\n{}").encode())
    assert status == 403 and json.loads(raw)["reason"] == "no_grant"
    assert stack.http.requests == []


def test_a_body_over_the_grants_limit_is_a_legible_403(stack, token):
    _json_only(stack)
    with box_client(stack.gateway, token) as client:
        response = client.post(stack.http.url("/v1/send"), content=body_of(65),
                               headers={"Content-Type": "application/json"})
    body = deny_body(response)
    assert response.status_code == 403 and body["reason"] == "no_grant"
    assert "a body of 65 bytes is over its max_body_size of 64 bytes" in body["message"]
    assert stack.http.requests == []


def _chunked(stack, token, chunks: list[bytes]) -> tuple[int, bytes]:
    framed = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    return raw_request(stack.gateway, (
        f"POST http://127.0.0.1:{stack.http.port}/v1/send HTTP/1.1\r\nHost: 127.0.0.1:{stack.http.port}\r\n"
        f"Proxy-Authorization: {proxy_auth(token)}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n").encode() + framed)


def test_a_chunked_body_is_judged_by_the_size_the_upstream_receives(stack, token):
    _json_only(stack)
    body = body_of(64)
    status, raw = _chunked(stack, token, [body[:40], body[40:]])  # 64 bytes in two chunks
    assert status == 200, raw
    [seen] = stack.http.requests
    assert seen["body"] == body
    longer = body_of(65)
    status, raw = _chunked(stack, token, [longer[:40], longer[40:60], longer[60:]])  # 65 bytes
    assert status == 403 and "a body of 65 bytes is over" in json.loads(raw)["message"]
    assert len(stack.http.requests) == 1


def test_a_deny_with_a_condition_denies_only_the_requests_that_meet_it(stack, token):
    grant("open", stack.http)
    grant("no-debug", stack.http, mode="deny", header_conditions=[{"name": "x-debug", "present": True}])
    with box_client(stack.gateway, token) as client:
        plain = client.get(stack.http.url("/v1/a"))
        debug = client.get(stack.http.url("/v1/b"), headers={"X-Debug": "1"})
    assert plain.status_code == 200
    body = deny_body(debug)
    assert debug.status_code == 403 and body["reason"] == "denied_by_grant" and "no-debug" in body["message"]
    assert [r["path"] for r in stack.http.requests] == ["/v1/a"]


def test_conditions_judge_the_boxs_headers_not_the_injected_credential(stack, token, secret):
    # `authorization: absent` on a grant that injects Authorization: the box must not send its own, and the
    # upstream still receives the injected one (conditions never see what the gateway adds).
    grant("keyed", stack.https, secret=secret, inject_header="authorization", inject_format="Bearer {secret}",
          header_conditions=[{"name": "authorization", "absent": True}])
    with box_client(stack.gateway, token) as client:
        ok = client.get(stack.https.url("/v1/a"))
        own = client.get(stack.https.url("/v1/b"), headers={"Authorization": "Bearer box-chosen"})
    assert ok.status_code == 200, ok.text
    assert deny_body(own)["reason"] == "no_grant" and own.status_code == 403
    [seen] = stack.https.requests
    assert seen["path"] == "/v1/a" and seen["headers"]["authorization"] == f"Bearer {SECRET_VALUE}"
