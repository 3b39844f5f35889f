"""A dot segment with ';' parameters, in every encoded form (issue 22 item 1), through a real mitmdump to a
recording upstream: with a grant for GET /public/**, none of them reaches the upstream. A server that
decodes %3B (once or twice) and strips path parameters would read `/public/..%3B/secret` as `/secret`;
the control plane refuses to give such a path a canonical form (controlplane.policy.normalize, the
shared table tests/contract/canonical/paths.json), so no grant can match it and the gateway forwards
nothing."""

from __future__ import annotations

import json

import pytest

from tests.integration.gateway.conftest import grant, proxy_auth, raw_request

pytestmark = pytest.mark.integration

ENCODED_DOT_PARAMETERS = [
    "/public/..;/secret",  # the raw form, refused before this fix too
    "/public/..%3B/secret",
    "/public/..%3b/secret",
    "/public/.%3B/x",
    "/public/.%3b/x",
    "/public/..%3Bjsessionid=1/secret",
    "/public/%2e%2e%3b/secret",
    "/public/%2E%2E%3B/secret",
    "/public/.%2e%3B/secret",
    "/public/%2e.%3b/secret",
    "/public/..%253B/secret",
    "/public/..%253b/secret",
    "/public/.%253B/x",
    "/public/..%25253B/secret",
    "/public/%2e%2e%253b/secret",
    "/public/..%3B",
]


def _get(stack, token: str, path: str) -> tuple[int, dict]:
    authority = f"127.0.0.1:{stack.http.port}"
    status, body = raw_request(stack.gateway, (
        f"GET http://{authority}{path} HTTP/1.1\r\nHost: {authority}\r\n"
        f"Proxy-Authorization: {proxy_auth(token)}\r\nContent-Length: 0\r\n\r\n").encode())
    return status, json.loads(body) if body.startswith(b"{") else {}


@pytest.mark.parametrize("path", ENCODED_DOT_PARAMETERS)
def test_an_encoded_dot_segment_with_parameters_never_reaches_the_upstream(stack, token, path):
    grant("public", stack.http, methods=["GET"], paths=["/public/**"])
    status, body = _get(stack, token, path)
    assert (status, body.get("verdict"), body.get("reason")) == (403, "deny", "no_grant"), body
    assert "dot segment" in body["message"]
    assert stack.http.requests == []


@pytest.mark.parametrize("path", ["/public/ok", "/public/a%3Bb", "/public/..a%3B/x"])
def test_an_ordinary_public_path_still_reaches_the_upstream_as_sent(stack, token, path):
    grant("public", stack.http, methods=["GET"], paths=["/public/**"])
    status, _ = _get(stack, token, path)
    assert status == 200
    assert [r["path"] for r in stack.http.requests] == [path]
