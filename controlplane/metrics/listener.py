"""The control plane's metrics listener: GET /metrics on a port of its own in the decision API's process,
bound to loopback unless the operator says otherwise, answering only a bearer token whose SHA-256 matches
the configured hash (scripts/mint-secrets.sh makes var/metrics.token and var/metrics-token.sha256).

Why a listener of its own, and why a token as well: the metrics name workers and show their spend, so
they are not for everyone who can reach a port. The web server's listener is the user-facing one and never
serves them; the decision API's port is the gateway's, and a scrape there would share its event loop with
decisions (the scrape-time collector queries the database). Here a scrape runs on its own thread, away from
the event loop, with its own database connection. Loopback keeps boxes and the network out (boxes reach only
the gateway's port); the token keeps out whoever else can reach the address, and lets an operator bind
it wider (compose, a Prometheus on another machine) without exposing it."""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
from collections.abc import Callable
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.db import close_old_connections
from prometheus_client import REGISTRY, make_wsgi_app
from prometheus_client.registry import CollectorRegistry

from controlplane.core.service_token import metrics_token_sha256
from controlplane.metrics.state import StateCollector

log = logging.getLogger(__name__)
METRICS_PATH = "/metrics"
_state_lock = threading.Lock()
_state_registered: set[int] = set()


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        pass  # no access log: the scraper's address and the path are all it would say


def _answer(start_response, status: str, text: bytes, extra: list[tuple[str, str]] = ()) -> list[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(text))), ("Cache-Control", "no-store"), *extra])
    return [text]


def _authorised(environ: dict, expected: str) -> bool:
    scheme, _, token = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
    if not expected or scheme.lower() != "bearer" or not token.strip():
        return False
    offered = hashlib.sha256(token.strip().encode("utf-8", "surrogatepass")).hexdigest()
    return hmac.compare_digest(offered, expected)


def metrics_app(registry: CollectorRegistry = REGISTRY,
                expected_hash: Callable[[], str] = metrics_token_sha256):
    """WSGI app: GET /metrics with the scrape token gets the exposition; without it 401, anything else 404.
    No hash configured means every scrape is refused."""
    exposition = make_wsgi_app(registry)

    def app(environ, start_response):
        if environ.get("PATH_INFO") != METRICS_PATH or environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return _answer(start_response, "404 Not Found", b"not found\n")
        if not _authorised(environ, expected_hash()):
            return _answer(start_response, "401 Unauthorized", b"a bearer scrape token is required\n",
                           [("WWW-Authenticate", 'Bearer realm="roster-metrics"')])
        close_old_connections()  # this thread's connection may have outlived CONN_MAX_AGE or broken
        try:
            return exposition(environ, start_response)
        finally:
            close_old_connections()

    return app


def register_state(registry: CollectorRegistry = REGISTRY) -> None:
    """The scrape-time collector, once per registry (the decision API's process only)."""
    with _state_lock:
        if id(registry) not in _state_registered:
            registry.register(StateCollector())
            _state_registered.add(id(registry))


def start(host: str, port: int, registry: CollectorRegistry = REGISTRY) -> WSGIServer:
    """Serve the metrics on (host, port) from a daemon thread; returns the server (port 0: any free one)."""
    register_state(registry)
    server = make_server(host, port, metrics_app(registry), server_class=_Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="roster-metrics", daemon=True).start()
    log.info("metrics on http://%s:%s%s (bearer token required)", host, server.server_port, METRICS_PATH)
    return server
