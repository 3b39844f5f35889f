"""What the browser tests drive: a daphne server on the test database with the Redis channel layer, the
real gateway in front of a loopback upstream, Chromium through Playwright, and a box-like client whose
request is held at the gateway until a person decides."""

from __future__ import annotations

import hashlib
import http.server
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from django.test import Client

from tests.support import procs

ARTIFACTS = procs.REPO / "test-artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
TIMINGS = ARTIFACTS / "browser-timings.txt"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
UPSTREAM_BODY = b"upstream ok"


def control_plane_env(db_name: str, redis_url: str, service_token: str, ttl_seconds: int,
                      hold_seconds: int | None = None) -> dict[str, str]:
    """`hold_seconds`: the box's own wait (ROSTER_APPROVAL_HOLD_SECONDS); by default past the approval's
    life, so a held request lasts as long as its approval can be given."""
    return procs.control_plane_env(db_name, redis_url, {
        "ROSTER_GATEWAY_TOKEN_SHA256": hashlib.sha256(service_token.encode()).hexdigest(),
        "ROSTER_APPROVAL_TTL_SECONDS": str(ttl_seconds),
        "ROSTER_APPROVAL_HOLD_SECONDS": str(ttl_seconds + 30 if hold_seconds is None else hold_seconds),
    })


class _Upstream(http.server.BaseHTTPRequestHandler):
    received: list[tuple[str, str, bytes, dict[str, str]]] = []
    received_at: list[float] = []  # wall-clock time each request arrived, in the order of `received`

    def _answer(self):
        self.received_at.append(time.time())
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        self.received.append((self.command, self.path, body, {k.lower(): v for k, v in self.headers.items()}))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(UPSTREAM_BODY)))
        self.end_headers()
        self.wfile.write(UPSTREAM_BODY)

    do_GET = do_POST = _answer

    def log_message(self, *args):  # keep test output quiet
        pass


class UpstreamServer:
    """The 'internet' the box wants to reach: a plain HTTP server on loopback."""

    def __init__(self):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@dataclass
class HeldRequest:
    """A box-side client request sent through the gateway in a background thread."""

    proxy_url: str
    url: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    started: float = 0.0
    finished: float = 0.0
    response: httpx.Response | None = None
    error: BaseException | None = None
    _thread: threading.Thread | None = field(default=None, repr=False)

    def start(self) -> HeldRequest:
        def send():
            try:
                with httpx.Client(proxy=self.proxy_url, timeout=90) as client:
                    self.response = client.post(self.url, content=self.body,
                                                headers={"content-type": "text/html", **self.headers})
            except BaseException as exc:  # noqa: BLE001 - reported by result()
                self.error = exc
            finally:
                self.finished = time.monotonic()

        self.started = time.monotonic()
        self._thread = threading.Thread(target=send, daemon=True)
        self._thread.start()
        return self

    def result(self, timeout: float = 60) -> httpx.Response:
        assert self._thread is not None
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the held request never completed"
        if self.error:
            raise self.error
        assert self.response is not None
        return self.response


def session_cookie(user, base_url: str) -> dict:
    """Sign a user in without typing (the login form has its own test): a real session row."""
    client = Client()
    client.force_login(user)
    return {"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base_url}


def shot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def record_timing(name: str, seconds: float) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    line = f"{name}: {seconds * 1000:.0f} ms"
    print(line)
    with TIMINGS.open("a") as fh:
        fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {line}\n")
