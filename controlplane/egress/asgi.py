"""Serving /api/gateway/ under ASGI. The gateway's two per-request calls (/decide, /outcomes) go straight
to their one route each (controlplane.egress.gateway_calls): no Django request, middleware, URL resolving
or request signals on the path every forwarded request takes. The rest of the gateway API (approval
waits, traces, health, ...) is Django's, served by Django's own ASGI handler."""

from __future__ import annotations

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler

from controlplane.egress.gateway_calls import JSON_TYPE, ROUTES, TOO_LARGE, Reply, reply

GATEWAY_PATH_PREFIX = "/api/gateway/"


async def _read_body(receive) -> bytes | Reply | None:
    """The request's body; TOO_LARGE past Django's upload limit (the rest is not kept); None when the
    client went away before it was sent."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= limit:
            chunks.append(chunk)
        if not message.get("more_body", False):
            return TOO_LARGE if size > limit else b"".join(chunks)


async def serve_call(scope, receive, send) -> None:
    """One call on a route of controlplane.egress.gateway_calls.ROUTES."""
    body = await _read_body(receive)
    if body is None:
        return
    authorization = [value.decode("latin-1") for name, value in scope["headers"]
                     if name.lower() == b"authorization"]
    answer = body if isinstance(body, Reply) else await reply(ROUTES[scope["path"]], scope["method"],
                                                              authorization, body)
    headers = [(b"content-type", JSON_TYPE), (b"content-length", str(len(answer.body)).encode())]
    if answer.allow_post:
        headers.append((b"allow", b"POST"))
    try:
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})
    except OSError:
        pass  # the gateway went away while we were answering; the work it asked for stands


def gateway_first(django_app):
    """ASGI app: the gateway's per-request calls to their routes, everything else to `django_app`."""

    async def app(scope, receive, send):
        if scope["type"] == "http" and scope.get("path", "") in ROUTES:
            return await serve_call(scope, receive, send)
        return await django_app(scope, receive, send)

    return app


async def _not_found(send) -> None:
    await send({"type": "http.response.start", "status": 404,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"detail": "not found"}'})


def gateway_only():
    """ASGI app for the decision API's own process (controlplane.decision_server): /api/gateway/ and
    nothing else; every other path is 404, websockets are refused."""
    django_app = ASGIHandler()

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            from controlplane.egress.approval_wait import wakeups  # loads models: only once apps are ready

            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    wakeups.start()
                elif message["type"] == "lifespan.shutdown":
                    await wakeups.stop()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        if scope["type"] != "http":
            await send({"type": "websocket.close"})
            return
        path = scope.get("path", "")
        if path in ROUTES:
            return await serve_call(scope, receive, send)
        if path.startswith(GATEWAY_PATH_PREFIX):
            return await django_app(scope, receive, send)
        return await _not_found(send)

    return app
