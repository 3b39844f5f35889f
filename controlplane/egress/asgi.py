"""Serving /api/gateway/ under ASGI with as little per-request machinery as Django allows: no middleware,
no per-request thread context, no request signals. The API's blocking work runs on its own database
thread (controlplane.egress.db_thread.on_db_thread), so nothing here needs Django's thread-sensitive
executor."""

from __future__ import annotations

import asyncio

from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.exception import convert_exception_to_response
from django.urls import set_script_prefix

from controlplane.egress.fast_routes import JSON_HEADERS, ROUTES, answer_fast

GATEWAY_PATH_PREFIX = "/api/gateway/"


class GatewayASGIHandler(ASGIHandler):
    """Django's ASGI handler for /api/gateway/ only. Sessions, CSRF, messages and the rest do nothing for
    a bearer-authenticated JSON API, and under ASGI every sync middleware costs two thread hops per
    request. Django's request_started / request_finished receivers (closing the request thread's
    database connection) cost a fresh thread per request plus two hops, for a connection the gateway API
    never uses: its database thread keeps its own and drops it when it breaks."""

    def load_middleware(self, is_async=False):
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        get_response = self._get_response_async if is_async else self._get_response
        self._middleware_chain = convert_exception_to_response(get_response)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"the gateway API serves HTTP only, not {scope['type']}")
        await self.handle(scope, receive, send)

    async def handle(self, scope, receive, send):
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        try:
            if scope.get("path", "") in ROUTES:
                answer = await answer_fast(scope, body_file.read())
                if answer is not None:
                    await _send_json(send, answer)
                    return
                body_file.seek(0)
            set_script_prefix(get_script_prefix(scope))
            request, error_response = self.create_request(scope, body_file)
            if request is None:
                await self.send_response(error_response, send)
                return
            await self._respond_unless_disconnected(request, receive, send)
        finally:
            body_file.close()

    async def _respond_unless_disconnected(self, request, receive, send) -> None:
        # As Django does: a client that goes away (e.g. a gateway giving up on a long-poll) cancels the
        # view instead of letting it run on.
        async def respond():
            response = await self.run_get_response(request)
            try:
                await self.send_response(response, send)
            except asyncio.CancelledError:
                pass  # the client went away while we were answering
            # response.close() is not called: it only sends request_finished (see the class docstring).

        listener = asyncio.create_task(self.listen_for_disconnect(receive))
        responder = asyncio.create_task(respond())
        await asyncio.wait((listener, responder), return_when=asyncio.FIRST_COMPLETED)
        for task in (listener, responder):
            if not task.done():
                task.cancel()
            try:
                await task
            except (asyncio.CancelledError, RequestAborted):
                pass


async def _send_json(send, body: bytes) -> None:
    try:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*JSON_HEADERS, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
    except OSError:
        pass  # the gateway went away while we were answering; the work it asked for stands


def gateway_first(django_app):
    """ASGI app: gateway API requests to the bare handler, everything else to `django_app`."""
    gateway_app = GatewayASGIHandler()

    async def app(scope, receive, send):
        if scope["type"] == "http" and scope.get("path", "").startswith(GATEWAY_PATH_PREFIX):
            return await gateway_app(scope, receive, send)
        return await django_app(scope, receive, send)

    return app


async def _not_found(send) -> None:
    await send({"type": "http.response.start", "status": 404,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"detail": "not found"}'})


def gateway_only():
    """ASGI app for the decision API's own process (controlplane.decision_server): /api/gateway/ and
    nothing else; every other path is 404, websockets are refused."""
    gateway_app = GatewayASGIHandler()

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
        if scope.get("path", "").startswith(GATEWAY_PATH_PREFIX):
            return await gateway_app(scope, receive, send)
        return await _not_found(send)

    return app
