from __future__ import annotations

import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.integration.compose.stack import compose_stack
from tests.support import procs


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    logs = procs.REPO / "test-artifacts"
    logs.mkdir(exist_ok=True)
    with compose_stack(tmp_path_factory.mktemp("compose"), logs) as stack:
        yield stack


class _Upstream(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        body = f"upstream saw {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def upstream(stack):
    """A plain HTTP server on host loopback: the private upstream both gateways may dial."""
    server = ThreadingHTTPServer(("127.0.0.1", stack.upstream_port), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{stack.upstream_port}"
    finally:
        with contextlib.suppress(Exception):
            server.shutdown()
        server.server_close()
