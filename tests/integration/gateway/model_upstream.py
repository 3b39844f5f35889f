"""A local stand-in for model providers, speaking their shapes (OpenAI chat completions plain and SSE,
the Responses API, Anthropic Messages): real HTTP/1.1 over loopback, streamed bodies sent event by event
with a pause between them, chunked. It honours `stream_options.include_usage` as OpenAI does, records
each request's exact body and each response's exact body bytes, and can cut a stream off mid-way, echo
the request's Authorization header inside a stream (split across writes), or send a whole gzip body."""

from __future__ import annotations

import gzip
import importlib.util
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_SHAPES = Path(__file__).resolve().parents[3] / "gateway" / "tests" / "model_shapes.py"
_spec = importlib.util.spec_from_file_location("roster_model_shapes", _SHAPES)
shapes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shapes)

EVENT_PAUSE_SECONDS = 0.15
USAGE = {"prompt": 1200, "completion": 300, "cached": 1024, "reasoning": 200}


def _events(body: bytes) -> list[bytes]:
    return [e + b"\n\n" for e in body.split(b"\n\n") if e]


class _BurstServer(ThreadingHTTPServer):
    # The standard listen backlog (5) resets connections when 64 boxes' calls are admitted together;
    # a dropped connection is a 502 the gateway charges at its worst case, which is not what a test of
    # the cap wants to measure.
    request_queue_size = 256


class ModelUpstream:
    tls = False

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.sent: list[bytes] = []  # each response body, exactly as written (before chunk framing)
        self.finished_at: list[float] = []
        self.usage = dict(USAGE)
        self.pause = EVENT_PAUSE_SECONDS
        self._server = _BurstServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def response_for(path: str, doc: dict, headers, u: dict) -> tuple[str, bytes, bool]:
    """(content type, body, streamed) the provider would answer, reporting usage `u`."""
    stream = doc.get("stream") is True
    if path.endswith("/chat/completions"):
        if not stream:
            return "application/json", shapes.chat_json(prompt=u["prompt"], completion=u["completion"],
                                                        cached=u["cached"], reasoning=u["reasoning"]), False
        include = (doc.get("stream_options") or {}).get("include_usage") is True
        return "text/event-stream", shapes.chat_sse(include_usage=include, prompt=u["prompt"],
                                                    completion=u["completion"], cached=u["cached"],
                                                    reasoning=u["reasoning"]), True
    if path.endswith("/responses"):
        counts = {"input": u["prompt"], "output": u["completion"], "cached": u["cached"],
                  "reasoning": u["reasoning"]}
        if not stream:
            return "application/json", shapes.responses_json(**counts), False
        return "text/event-stream", shapes.responses_sse(**counts), True
    if path.endswith("/messages"):
        written, written_1h = u.get("cache_write", 0), u.get("cache_write_1h")
        counts = {"input": u["prompt"] - u["cached"] - written, "output": u["completion"],
                  "cache_read": u["cached"], "cache_write": written, "cache_write_1h": written_1h}
        if not stream:
            return "application/json", shapes.anthropic_json(**counts), False
        return "text/event-stream", shapes.anthropic_sse(**counts), True
    if path.endswith("/echo-stream"):
        secret = headers.get("authorization", "").encode()
        data = json.dumps({"echo": headers.get("authorization", "")}).encode()
        return "text/event-stream", b"data: " + data + b"\n\n" + b"data: " + secret + b"\n\n", True
    raise KeyError(path)


def _handler(upstream: ModelUpstream):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802 - http.server's naming
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            path = self.path.split("?", 1)[0]
            upstream.requests.append({"path": path, "body": raw,
                                      "headers": {k.lower(): v for k, v in self.headers.items()}})
            doc = json.loads(raw or b"{}")
            cut = path.startswith("/cut")
            content_type, body, streamed = response_for(path.removeprefix("/cut"), doc,
                                                        {k.lower(): v for k, v in self.headers.items()},
                                                        upstream.usage)
            upstream.sent.append(body)
            self.send_response(200)
            self.send_header("content-type", content_type)
            if "x-test-gzip" in self.headers:  # a whole gzip body, even for an event stream
                body = gzip.compress(body)
                self.send_header("content-encoding", "gzip")
                streamed = False
            if not streamed:
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                upstream.finished_at.append(time.monotonic())
                return
            self.send_header("transfer-encoding", "chunked")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            events = _events(body)
            if cut:
                events = events[:len(events) // 2]
            for i, event in enumerate(events):
                pieces = [event[:len(event) // 2], event[len(event) // 2:]] if path.endswith("echo-stream") \
                    else [event]
                for piece in pieces:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                    time.sleep(upstream.pause if i < len(events) - 1 else 0)
            if cut:
                self.close_connection = True
                self.connection.shutdown(2)
                upstream.finished_at.append(time.monotonic())
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            upstream.finished_at.append(time.monotonic())

        def log_message(self, *args):
            pass

    return Handler
