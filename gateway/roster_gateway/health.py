"""A tiny loopback HTTP endpoint the dispatcher checks before starting a box: 200 when the gateway runs,
the control plane answers its /health and the two agree on the settings they share
(roster_gateway.shared_limits), 503 otherwise, naming each disagreement; the body also shows the
operator's settings that widen what the gateway dials (the private upstreams). Plain asyncio, no framework.

The same loopback listener serves the gateway's Prometheus metrics at /metrics (roster_gateway.metrics):
boxes reach only the proxy port, never the host's loopback, so neither path is reachable from a box."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable

_MAX_REQUEST_LINE = 1024
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class HealthServer:
    def __init__(self, port: int, probe: Callable[[float], Awaitable[bool]], *, cache_seconds: float,
                 probe_timeout: float, info: dict | None = None,
                 metrics: Callable[[], bytes] | None = None,
                 disagreements: Callable[[], tuple[str, ...]] = tuple):
        self.port = port
        self._probe = probe
        self._cache_seconds = cache_seconds
        self._probe_timeout = probe_timeout
        self._info = dict(info or {})  # configuration shown to the operator, e.g. the private upstreams
        self._cached: tuple[float, bool] | None = None
        self._metrics = metrics  # the exposition of the gateway's metrics; None: /metrics is 404
        # Shared settings on which the gateway and the control plane disagree (roster_gateway.shared_limits)
        self._disagreements = disagreements
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def control_plane_ok(self) -> bool:
        now = time.monotonic()
        if self._cached and now - self._cached[0] < self._cache_seconds:
            return self._cached[1]
        ok = await self._probe(self._probe_timeout)
        self._cached = (time.monotonic(), ok)
        return ok

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self._probe_timeout + 2):
                line = await reader.readline()
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
            parts = line[:_MAX_REQUEST_LINE].decode("latin-1").split()
            path = parts[1].split("?")[0] if len(parts) >= 2 and parts[0] == "GET" else ""
            content_type = "application/json"
            if path == "/metrics" and self._metrics is not None:
                status, payload, content_type = 200, self._metrics(), METRICS_CONTENT_TYPE
            elif path not in ("/healthz", "/health"):
                status, payload = 404, json.dumps({"ok": False, "error": "not found"}).encode()
            else:
                cp = await self.control_plane_ok()
                disagree = list(self._disagreements())
                ok = cp and not disagree
                status, payload = (200 if ok else 503), json.dumps(
                    {"ok": ok, "gateway": True, "control_plane": cp, **self._info,
                     **({"disagreements": disagree} if disagree else {})}).encode()
            head = (f"HTTP/1.1 {status} {'OK' if status == 200 else 'Unavailable'}\r\n"
                    f"Content-Type: {content_type}\r\nContent-Length: {len(payload)}\r\n"
                    "Connection: close\r\n\r\n").encode()
            writer.write(head + payload)
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
