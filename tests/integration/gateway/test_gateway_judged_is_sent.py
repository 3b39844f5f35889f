"""What reaches the upstream is what was judged: raw proxy requests through a real mitmdump, and what a
recording upstream received. Non-canonical paths, methods and Hosts are refused (docs/grants.md)."""

from __future__ import annotations

import json

import pytest

from tests.integration.gateway.conftest import grant, proxy_auth, raw_request

pytestmark = pytest.mark.integration


def _send(stack, token: str, method: str, path: str, host_header: str | None = None,
          host: str = "127.0.0.1") -> tuple[int, dict]:
    authority = f"{host}:{stack.http.port}"
    status, body = raw_request(stack.gateway, (
        f"{method} http://{authority}{path} HTTP/1.1\r\nHost: {host_header or authority}\r\n"
        f"Proxy-Authorization: {proxy_auth(token)}\r\nContent-Length: 0\r\n\r\n").encode())
    return status, json.loads(body) if body.startswith(b"{") else {}


PATHS = [
    ("dot segments", "/v1/admin/../files/x"),
    ("encoded dot segments", "/v1/admin/%2e%2e/files/x"),
    ("mixed encoded dot segments", "/v1/admin/.%2E/files/x"),
    ("single dot", "/v1/files/./x"),
    ("empty segment", "/v1//files/x"),
    ("encoded unreserved letters", "/v1/%66iles/x"),
]


@pytest.mark.parametrize("name,path", PATHS, ids=[p[0] for p in PATHS])
def test_a_path_judged_as_another_is_refused_and_never_reaches_the_upstream(stack, token, name, path):
    grant("files-only", stack.http, paths=["/v1/files/**"])
    status, body = _send(stack, token, "GET", path)
    assert status == 400 and body["reason"] == "malformed_request", body
    assert stack.http.requests == []


def test_the_canonical_path_reaches_the_upstream_exactly(stack, token):
    grant("files-only", stack.http, paths=["/v1/files/**"])
    status, _ = _send(stack, token, "GET", "/v1/files/x;v=1?q=%2e%2e/admin")
    assert status == 200
    assert [r["path"] for r in stack.http.requests] == ["/v1/files/x;v=1?q=%2e%2e/admin"]


@pytest.mark.parametrize("method", ["get", "Get", "dElEtE"])
def test_a_method_not_in_upper_case_is_refused(stack, token, method):
    grant("get-only", stack.http, methods=["GET"])
    status, body = _send(stack, token, method, "/v1/x")
    assert status == 400 and body["reason"] == "malformed_request", body
    assert stack.http.requests == []


@pytest.mark.parametrize("host_header", ["LocalHost:{port}", "localhost.:{port}", "localhost:0{port}"])
def test_a_host_not_in_canonical_form_is_refused(stack, token, host_header):
    grant("local", stack.http, host="localhost")
    status, body = _send(stack, token, "GET", "/v1/x", host=host_header.split(":")[0].rstrip(".").lower(),
                         host_header=host_header.format(port=stack.http.port))
    assert status == 400 and body["reason"] == "malformed_request", body
    assert stack.http.requests == []
    ok, _ = _send(stack, token, "GET", "/v1/x", host="localhost")
    assert ok == 200 and stack.http.requests[0]["headers"]["host"] == f"localhost:{stack.http.port}"
