"""/api/gateway/ is served by the middleware-free handler; every other path keeps Django's full stack."""

import asyncio

import pytest

from controlplane.egress.asgi import GatewayASGIHandler, gateway_first


def test_gateway_handler_has_no_middleware():
    handler = GatewayASGIHandler()
    assert handler._view_middleware == [] and handler._exception_middleware == []


@pytest.mark.parametrize(("path", "expected"), [
    ("/api/gateway/decide", "gateway"), ("/api/gateway/health", "gateway"), ("/admin/", "django"),
    ("/api/gatewayx/decide", "django"), ("/api/other/", "django"), ("/", "django"),
])
def test_routing(path, expected, monkeypatch):
    seen = []

    async def django_app(scope, receive, send):
        seen.append("django")

    async def bare(self, scope, receive, send):
        seen.append("gateway")

    monkeypatch.setattr(GatewayASGIHandler, "__call__", bare)
    app = gateway_first(django_app)
    asyncio.run(app({"type": "http", "path": path}, None, None))
    assert seen == [expected]


def test_websockets_never_reach_the_gateway_handler(monkeypatch):
    seen = []

    async def django_app(scope, receive, send):
        seen.append("django")

    monkeypatch.setattr(GatewayASGIHandler, "__call__", lambda *a: seen.append("gateway"))
    asyncio.run(gateway_first(django_app)({"type": "websocket", "path": "/api/gateway/x"}, None, None))
    assert seen == ["django"]
