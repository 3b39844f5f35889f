"""The gateway bench's load client: raw keep-alive sockets on asyncio, so the client costs as little as
possible. Plain HTTP sends absolute-form requests to the proxy; HTTPS opens a CONNECT tunnel per
connection (the run token on the CONNECT, as a box sends it), starts TLS inside it trusting the proxy's
CA (public certificate only) and sends origin-form requests over it, keep-alive, as a model client does.
The tunnel and its handshakes are made before a connection's first timed request."""

from __future__ import annotations

import asyncio
import base64
import ssl
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

WARMUP = 50


@dataclass(frozen=True)
class Target:
    """What one bench row sends through one proxy."""

    proxy_port: int
    request: bytes
    tunnel: bytes | None = None  # the CONNECT request, for HTTPS
    tls: ssl.SSLContext | None = None  # trusts the proxy's CA


def _auth(token: str | None) -> str:
    if not token:
        return ""
    return "Proxy-Authorization: Basic " + base64.b64encode(f"run:{token}".encode()).decode() + "\r\n"


def http_target(proxy_port: int, upstream_port: int, token: str | None) -> Target:
    return Target(proxy_port, (f"GET http://127.0.0.1:{upstream_port}/bench HTTP/1.1\r\n"
                               f"Host: 127.0.0.1:{upstream_port}\r\n{_auth(token)}"
                               "User-Agent: roster-bench\r\n\r\n").encode())


def https_target(proxy_port: int, upstream_port: int, token: str | None, proxy_ca: Path) -> Target:
    authority = f"127.0.0.1:{upstream_port}"
    return Target(
        proxy_port,
        f"GET /bench HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: roster-bench\r\n\r\n".encode(),
        tunnel=f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{_auth(token)}\r\n".encode(),
        tls=ssl.create_default_context(cafile=str(proxy_ca)),
    )


async def _read_response(reader) -> tuple[int, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length, close = 0, False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"connection" and value.strip().lower() == b"close":
            close = True
    if length:
        await reader.readexactly(length)
    return status, close


async def _open(target: Target):
    reader, writer = await asyncio.open_connection("127.0.0.1", target.proxy_port)
    if target.tunnel is not None:
        writer.write(target.tunnel)
        status, _ = await _read_response(reader)
        if status != 200:
            writer.close()
            raise RuntimeError(f"CONNECT answered {status}")
        await writer.start_tls(target.tls, server_hostname="127.0.0.1")
    return reader, writer


async def _worker(target: Target, count: int, latencies: list, errors: list) -> None:
    reader = writer = None
    for _ in range(count):
        if writer is None:
            reader, writer = await _open(target)
        start = time.perf_counter()
        writer.write(target.request)
        status, close = await _read_response(reader)
        latencies.append(time.perf_counter() - start)
        if status != 200:
            errors.append(status)
        if close:
            writer.close()
            reader = writer = None
    if writer is not None:
        writer.close()


async def _load(target: Target, total: int, concurrency: int) -> tuple[list, list, float]:
    latencies: list[float] = []
    errors: list[int] = []
    per = total // concurrency
    start = time.perf_counter()
    await asyncio.gather(*(_worker(target, per, latencies, errors) for _ in range(concurrency)))
    return latencies, errors, time.perf_counter() - start


def measure(name: str, target: Target, c1_requests: int, c16_requests: int, warmup: int = WARMUP) -> dict:
    """p50/p99 over c1_requests sequential requests and req/s over c16_requests on 16 connections."""
    asyncio.run(_load(target, warmup, 1))
    lat, err1, _ = asyncio.run(_load(target, c1_requests, 1))
    _, err16, elapsed = asyncio.run(_load(target, c16_requests, 16))
    lat_ms = sorted(x * 1000 for x in lat)
    result = {
        "name": name, "p50": statistics.median(lat_ms),
        "p99": lat_ms[min(len(lat_ms) - 1, int(len(lat_ms) * 0.99))],
        "rps16": (c16_requests // 16 * 16) / elapsed, "errors": len(err1) + len(err16),
        "error_statuses": sorted(set(err1 + err16)),
    }
    print(f"  {name:<44} p50 {result['p50']:7.2f} ms   p99 {result['p99']:7.2f} ms   "
          f"c16 {result['rps16']:7.0f} req/s   errors {result['errors']} {result['error_statuses'] or ''}",
          flush=True)
    return result
