"""The gateway bench's helper servers, each its own process so it does not share the load client's CPU
time slice: the upstream (plain HTTP, or HTTPS under the bench's throwaway CA), a decision API that
answers allow at once (isolates the gateway's own cost), and a TCP proxy that delays each request.

    python -m bench.gateway_servers upstream [CERT KEY]     # HTTPS when given a certificate and key
    python -m bench.gateway_servers instant-cp [secret]  # "secret": the allow injects a made-up secret
    python -m bench.gateway_servers delay PORT MS

Each prints its listening port on its first line of output."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import subprocess
import sys
from collections.abc import Iterator

from tests.support import procs

OK_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
BACKLOG = 512

_ALLOW = (b'{"verdict":"allow","reason":null,"status":200,"message":"","decision_id":"dc_bench",'
          b'"grant":"bench","tunnel":false,"trace":false,"inject":[],"replace":[],"approval_id":null,'
          b'"hold_seconds":0,"budget":null}')


async def _read_request(reader) -> bytes:
    """One keep-alive request: returns its head, with its body (if any) read and dropped."""
    return (await _read_request_and_body(reader))[0]


async def _read_request_and_body(reader) -> tuple[bytes, bytes]:
    """One keep-alive request: its head and its body (empty if none)."""
    head = await reader.readuntil(b"\r\n\r\n")
    body = b""
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            body = await reader.readexactly(int(line.split(b":", 1)[1]))
    return head, body


def _outcome_results(body: bytes) -> bytes:
    """The answer to an outcome batch as the control plane gives it (docs/wire.md): one "ok" per outcome,
    so the gateway takes the batch as settled and does not report it again."""
    count = len(json.loads(body or b"{}").get("outcomes", []))
    return json.dumps({"results": ["ok"] * count}, separators=(",", ":")).encode()


async def _serve(handle, tls: ssl.SSLContext | None = None) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=BACKLOG, ssl=tls)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


async def _upstream_main(cert: str | None, key: str | None) -> None:
    tls = None
    if cert and key:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(cert, key)

    async def handle(reader, writer):
        try:
            while True:
                await _read_request(reader)
                writer.write(OK_RESPONSE)
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            writer.close()

    await _serve(handle, tls)


# An allow that injects a (made-up) secret: the gateway then scrubs the response for echoes of it.
BENCH_SECRET = "sk-bench-" + "Zq8vP3kL0xW9mN4tRr77" * 2
_ALLOW_SECRET = _ALLOW.replace(b'"inject":[],"replace":[]', (
    b'"inject":[{"header":"x-bench-key","value":"Bearer ' + BENCH_SECRET.encode() + b'"}],'
    b'"replace":[{"sentinel":"sk-roster-bench-sentinel-0000000000","value":"' + BENCH_SECRET.encode()
    + b'"}]'))


# The control plane's health answer at its defaults, limits included (the gateway checks its own against
# them, docs/settings.md): the contract fixture both sides test.
HEALTH = json.dumps(json.loads((procs.REPO / "tests" / "contract" / "health.json").read_text())["response"],
                    separators=(",", ":")).encode()


async def _instant_cp_main(secret: bool = False) -> None:
    allow = _ALLOW_SECRET if secret else _ALLOW

    async def handle(reader, writer):
        try:
            while True:
                head, request_body = await _read_request_and_body(reader)
                line = head.split(b"\r\n", 1)[0]
                body = (allow if b"/decide" in line else b'{"sentinels":[]}' if b"/sentinels" in line
                        else HEALTH if b"/health" in line
                        else _outcome_results(request_body) if b"/outcomes" in line else b'{"ok":true}')
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    await _serve(handle)


async def _delay_main(target_port: int, delay_ms: int) -> None:
    """A TCP proxy that holds every client->server chunk (one HTTP request each) for delay_ms."""

    async def pipe(reader, writer, delay):
        try:
            while data := await reader.read(65536):
                if delay:
                    await asyncio.sleep(delay)
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def handle(reader, writer):
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
        await asyncio.gather(pipe(reader, up_writer, delay_ms / 1000), pipe(up_reader, writer, 0))

    await _serve(handle)


@contextlib.contextmanager
def helper(*args: str) -> Iterator[int]:
    """One helper server in its own process; yields its port."""
    proc = subprocess.Popen([sys.executable, "-m", "bench.gateway_servers", *args], cwd=procs.REPO,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline()
        if not line.strip():
            raise RuntimeError(f"helper server {args[0]} exited before listening ({proc.wait(5)})")
        yield int(line)
    finally:
        procs.stop(proc)


if __name__ == "__main__":
    command = sys.argv[1:2]
    if command == ["upstream"]:
        asyncio.run(_upstream_main(*(sys.argv[2:4] if len(sys.argv) >= 4 else (None, None))))
    elif command == ["instant-cp"]:
        asyncio.run(_instant_cp_main(secret=sys.argv[2:3] == ["secret"]))
    elif command == ["delay"]:
        asyncio.run(_delay_main(int(sys.argv[2]), int(sys.argv[3])))
    else:
        sys.exit(__doc__)
