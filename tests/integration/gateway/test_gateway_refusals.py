"""Legible refusals through a real mitmdump: an over-long request target is 414, an oversized header
block 431, an oversized body 413, each with its reason, and nothing reaches the upstream (never a
503 control_plane_unavailable because the decision API refused the facts)."""

from __future__ import annotations

import json

import pytest

from tests.integration.gateway.conftest import grant, proxy_auth, raw_request

pytestmark = pytest.mark.integration


def _request(stack, token: str, path: str = "/v1/x", extra_headers: str = ""):
    authority = f"127.0.0.1:{stack.http.port}"
    status, answer = raw_request(stack.gateway, (
        f"POST http://{authority}{path} HTTP/1.1\r\nHost: {authority}\r\n"
        f"Proxy-Authorization: {proxy_auth(token)}\r\n{extra_headers}\r\n").encode())
    if answer.startswith(b"{"):
        return status, json.loads(answer)
    # mitmproxy answers a declared body over its body_size_limit itself, before any hook runs: a 413
    # page naming the limit (the gateway sets that limit to roster_max_body_bytes).
    return status, {"reason": "body_too_large" if b"body_size_limit" in answer else None, "message": answer}


CASES = [
    ("over-long request target", {"path": "/v1/" + "a" * 17_000}, 414, "uri_too_long"),
    ("over-long query", {"path": "/v1/x?q=" + "a" * 17_000}, 414, "uri_too_long"),
    ("too many header fields", {"extra_headers": "".join(f"x-h{i}: v\r\n" for i in range(210))}, 431,
     "headers_too_large"),
    ("one huge header", {"extra_headers": "x-big: " + "b" * 17_000 + "\r\n"}, 431, "headers_too_large"),
    ("declared body over the limit", {"extra_headers": "Content-Length: 40000000\r\n"}, 413,
     "body_too_large"),
]


@pytest.mark.parametrize("name,kwargs,status,reason", CASES, ids=[c[0] for c in CASES])
def test_oversized_requests_are_refused_legibly(stack, token, name, kwargs, status, reason):
    grant("plain", stack.http)
    got, body = _request(stack, token, **kwargs)
    assert (got, body.get("reason")) == (status, reason), body
    assert body["message"] and stack.http.requests == []


def test_requests_just_under_the_limits_pass(stack, token):
    grant("plain", stack.http)
    long_path, _ = _request(stack, token, path="/v1/" + "a" * 16_000)
    many, _ = _request(stack, token, extra_headers="".join(f"x-h{i}: v\r\n" for i in range(90)))
    big, _ = _request(stack, token, extra_headers="x-big: " + "b" * 16_000 + "\r\n")
    assert (long_path, many, big) == (200, 200, 200)
    paths = [r["path"] for r in stack.http.requests]
    assert len(paths[0]) == 16_004 and len(stack.http.requests[2]["headers"]["x-big"]) == 16_000
