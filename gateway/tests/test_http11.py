"""The control-plane client's HTTP/1.1 pool against a real local server: keep-alive, framing, stale
connections, failures and deadlines (a timed-out connection is never reused)."""

from __future__ import annotations

import asyncio

import pytest
from roster_gateway.client import ControlPlaneClient, ControlPlaneDown
from roster_gateway.http11 import Http11Pool, HttpError

from tests.support_ports import free_port


class Server:
    """Answers each request with the next scripted raw response; records requests and connections."""

    def __init__(self, responses: list[bytes], close_after: int | None = None, stall: bool = False):
        self.responses, self.close_after, self.stall = responses, close_after, stall
        self.requests: list[bytes] = []
        self.connections = 0

    async def handle(self, reader, writer):
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), 0)
                self.requests.append(head + await reader.readexactly(length))
                if self.stall:
                    await asyncio.sleep(10)
                writer.write(self.responses.pop(0))
                await writer.drain()
                served += 1
                if self.close_after is not None and served >= self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    async def __aenter__(self):
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc):
        self.server.close()


def ok(body: bytes = b'{"ok":true}', extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def test_keep_alive_reuses_one_connection_and_sends_the_service_token():
    async with Server([ok(), ok(), ok()]) as server:
        pool = Http11Pool(server.url + "/api/gateway", {"Authorization": "Bearer svc"})
        for _ in range(3):
            assert await pool.request("POST", "/outcome", b"{}") == (200, b'{"ok":true}')
        await pool.close()
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /api/gateway/outcome HTTP/1.1\r\n")
    assert b"\r\nAuthorization: Bearer svc\r\n" in first and first.endswith(b"\r\n\r\n{}")


async def test_chunked_and_connection_close_responses():
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n4\r\n:1}\n\r\n0\r\n\r\n"
    async with Server([chunked, ok(extra=b"Connection: close\r\n"), ok()]) as server:
        pool = Http11Pool(server.url, {})
        assert await pool.request("GET", "/x") == (200, b'{"a":1}\n')
        assert (await pool.request("GET", "/x"))[0] == 200
        assert (await pool.request("GET", "/x"))[0] == 200
    assert server.connections == 2  # a new connection after "Connection: close"


async def test_a_stale_keep_alive_connection_is_replaced_transparently():
    async with Server([ok(), ok()], close_after=1) as server:
        pool = Http11Pool(server.url, {})
        assert (await pool.request("GET", "/a"))[0] == 200
        await asyncio.sleep(0.05)  # the server has closed the idle connection
        assert (await pool.request("GET", "/b"))[0] == 200
    assert server.connections == 2


async def test_connection_refused_is_an_error():
    pool = Http11Pool(f"http://127.0.0.1:{free_port()}", {})
    with pytest.raises(HttpError):
        await pool.request("GET", "/")


@pytest.mark.parametrize("raw", [b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                                 b"HTTP/1.1 200 OK\r\nbroken header\r\n\r\n"])
async def test_malformed_responses_are_errors(raw):
    async with Server([raw]) as server:
        with pytest.raises(HttpError):
            await Http11Pool(server.url, {}).request("GET", "/")


async def test_deadline_denies_and_the_connection_is_not_reused():
    async with Server([ok(), ok()], stall=True) as server:
        client = ControlPlaneClient(server.url, "svc", decide_timeout=0.2, outcome_timeout=0.2)
        with pytest.raises(ControlPlaneDown):
            await client.decide({"x": 1})
        assert len(client.replicas.replicas[0].transport._idle) == 0
        await client.close()


async def test_client_maps_http_errors_to_control_plane_down():
    async with Server([b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n"]) as server:
        client = ControlPlaneClient(server.url, "svc", decide_timeout=1, outcome_timeout=1)
        with pytest.raises(ControlPlaneDown, match="HTTP 500"):
            await client.decide({})
        await client.close()
