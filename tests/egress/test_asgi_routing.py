"""Under daphne the gateway's per-request calls go to their own routes; every other path, the rest of
/api/gateway/ included, keeps Django's full stack."""

import asyncio

import pytest

from controlplane.egress import asgi


@pytest.mark.parametrize(("path", "expected"), [
    ("/api/gateway/decide", "call"), ("/api/gateway/outcomes", "call"), ("/api/gateway/health", "django"),
    ("/api/gateway/decide/", "django"), ("/admin/", "django"), ("/api/gatewayx/decide", "django"),
    ("/", "django"),
])
def test_routing(path, expected, monkeypatch):
    seen = []

    async def django_app(scope, receive, send):
        seen.append("django")

    async def call(scope, receive, send):
        seen.append("call")

    monkeypatch.setattr(asgi, "serve_call", call)
    asyncio.run(asgi.gateway_first(django_app)({"type": "http", "path": path}, None, None))
    assert seen == [expected]


def test_websockets_never_reach_the_gateway_calls(monkeypatch):
    seen = []

    async def django_app(scope, receive, send):
        seen.append("django")

    monkeypatch.setattr(asgi, "serve_call", lambda *a: seen.append("call"))
    scope = {"type": "websocket", "path": "/api/gateway/decide"}
    asyncio.run(asgi.gateway_first(django_app)(scope, None, None))
    assert seen == ["django"]
