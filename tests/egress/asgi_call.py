"""One call on the decision API's ASGI app (controlplane.egress.asgi.gateway_only), as uvicorn makes it."""

from __future__ import annotations

import asyncio

from controlplane.egress.asgi import gateway_only
from tests.conftest import GATEWAY_SERVICE_TOKEN

AUTH = (b"authorization", f"Bearer {GATEWAY_SERVICE_TOKEN}".encode())
JSON = (b"content-type", b"application/json")


def asgi_call(path: str, body: bytes | list[bytes], headers=(AUTH, JSON),
              method: str = "POST") -> tuple[int, dict, bytes]:
    """(status, headers, body) of one call; a list `body` arrives in that many chunks."""
    chunks = body if isinstance(body, list) else [body]

    async def run():
        scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
                 "query_string": b"", "headers": list(headers), "root_path": "", "scheme": "http",
                 "server": ("127.0.0.1", 8002), "client": ("127.0.0.1", 40000), "http_version": "1.1",
                 "asgi": {"version": "3.0"}}
        incoming = [{"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
                    for i, chunk in enumerate(chunks)]
        sent = []

        async def receive():
            if incoming:
                return incoming.pop(0)
            await asyncio.sleep(3600)  # the client stays connected

        async def send(message):
            sent.append(message)

        await gateway_only()(scope, receive, send)
        return (sent[0]["status"], {k.decode().lower(): v.decode() for k, v in sent[0]["headers"]},
                b"".join(m.get("body", b"") for m in sent[1:]))
    return asyncio.run(run())
