"""The scripted model server: an upstream that speaks OpenAI chat completions (plain and streamed),
OpenAI responses, Anthropic messages and Gemini generateContent (plain, SSE and JSON-array streams),
answering from a script file. It runs outside any box, like a
real provider, and accepts only requests carrying the configured key, so a test that sees `authorized`
requests knows the gateway injected the real key (the box holds only a sentinel).

Every request is recorded (path, stream, step, authorized, the usage it was answered with; never the
credential it carried); GET
/_scripted/requests returns the records as JSON. Standard library only."""

from __future__ import annotations

import contextlib
import hmac
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tools.scripted_model import formats, gemini
from tools.scripted_model.script import Script, chat_turns, responses_turns

MAX_BODY = 8 * 1024 * 1024
KEEP_BODIES = 64  # the last request bodies kept for inspection (tests read tool results from them)


def _credential(headers, api: str) -> str:
    if api == "anthropic" and headers.get("x-api-key"):
        return headers["x-api-key"]
    if api == "gemini":
        return headers.get("x-goog-api-key", "")  # Gemini's SDKs send the key here, never as a bearer
    value = headers.get("authorization", "")
    return value[7:] if value[:7].lower() == "bearer " else ""


class ScriptedModel:
    """The script, the key and what was received; shared by every request thread."""

    def __init__(self, script: Script, key: str):
        if not key:
            raise ValueError("the scripted model needs a key to check")
        self.script, self.key = script, key
        self.records: list[dict] = []
        self.bodies: list[dict] = []
        self.lock = threading.Lock()

    def record(self, entry: dict, body: dict | None) -> None:
        with self.lock:
            self.records.append(entry)
            if body is not None:
                self.bodies.append(body)
                del self.bodies[:-KEEP_BODIES]

    def authorized_count(self) -> int:
        with self.lock:
            return sum(1 for r in self.records if r["authorized"])

    def key_matches(self, presented: str) -> bool:
        return bool(presented) and hmac.compare_digest(presented.encode(), self.key.encode())


def _handler(model: ScriptedModel):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "roster-scripted-model/1"

        def log_message(self, *args):
            pass

        def _send_json(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send_stream(self, events: Iterator[bytes], content_type: str = "text/event-stream") -> None:
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for event in events:
                self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        def do_GET(self):  # noqa: N802 - http.server's naming
            if self.path == "/_scripted/requests":
                with model.lock:
                    self._send_json(200, {"requests": list(model.records)})
                return
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def do_POST(self):  # noqa: N802
            route, _, query = self.path.partition("?")
            api = {"/v1/chat/completions": "chat", "/v1/responses": "responses",
                   "/v1/messages": "anthropic"}.get(route)
            generate = gemini.route(route)
            if generate is not None:
                api = "gemini"
            length = int(self.headers.get("content-length") or 0)
            if api is None or not 0 < length <= MAX_BODY:
                error = {"message": "unknown route or bad body", "type": "invalid_request_error"}
                self._send_json(404 if api is None else 400, {"error": error})
                return
            raw = self.rfile.read(length)
            authorized = model.key_matches(_credential(self.headers, api))
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise ValueError("not an object")
            except ValueError:
                model.record({"path": route, "api": api, "authorized": authorized, "error": "bad json"}, None)
                self._send_json(400, {"error": {"message": "body is not a JSON object",
                                                "type": "invalid_request_error"}})
                return
            stream = generate[1] if generate else body.get("stream") is True
            if api == "gemini":
                turns = gemini.turns(body)
            else:
                turns = responses_turns(body) if api == "responses" else chat_turns(body)
            entry = {"path": route, "api": api, "stream": stream, "step": turns, "authorized": authorized,
                     "model": generate[0] if generate else body.get("model")}
            if api == "gemini" and stream:
                entry["sse"] = "alt=sse" in query.split("&")
            if authorized:
                tokens_in, tokens_out = formats.usage_numbers(model.script.step(turns), raw)
                entry["usage"] = {"input": tokens_in, "output": tokens_out}
            model.record(entry, body)
            if not authorized and api == "gemini":
                message = "API key not valid. Please pass a valid API key."
                error = {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}
                self._send_json(400, {"error": error})
                return
            if not authorized:
                self._send_json(401, {"error": {"message": "Incorrect API key provided.",
                                                "type": "invalid_request_error", "code": "invalid_api_key"}})
                return
            self._answer(api, stream, body, raw, turns, sse=entry.get("sse", True))

        def _answer(self, api: str, stream: bool, body: dict, raw: bytes, turns: int, *, sse: bool) -> None:
            step, name = model.script.step(turns), model.script.model
            if api == "gemini" and stream and sse:
                self._send_stream(gemini.sse_stream(step, name, raw))
            elif api == "gemini" and stream:
                self._send_stream(gemini.array_stream(step, name, raw), "application/json; charset=UTF-8")
            elif api == "gemini":
                self._send_json(200, gemini.response(step, name, raw))
            elif api == "chat" and stream:
                options = body.get("stream_options") or {}
                usage = bool(options.get("include_usage"))
                self._send_stream(formats.chat_completion_stream(step, name, raw, usage))
            elif api == "chat":
                self._send_json(200, formats.chat_completion(step, name, raw))
            elif api == "responses" and stream:
                self._send_stream(formats.response_stream(step, name, raw))
            elif api == "responses":
                self._send_json(200, formats.response_object(step, name, raw))
            elif stream:
                self._send_stream(formats.anthropic_stream(step, name, raw))
            else:
                self._send_json(200, formats.anthropic_message(step, name, raw))

    return Handler


def make_server(model: ScriptedModel, host: str = "127.0.0.1", port: int = 0, *,
                tls: tuple[Path, Path] | None = None) -> ThreadingHTTPServer:
    """Bound and ready; `tls` is (certificate, key) for HTTPS."""
    server = ThreadingHTTPServer((host, port), _handler(model))
    server.daemon_threads = True
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tls[0]), str(tls[1]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    return server


@contextlib.contextmanager
def scripted_model_server(script: Script, key: str, *, host: str = "127.0.0.1", port: int = 0,
                          tls: tuple[Path, Path] | None = None) -> Iterator[tuple[int, ScriptedModel]]:
    """In a thread of this process (tests): yields (port, model) and stops at the end."""
    model = ScriptedModel(script, key)
    server = make_server(model, host, port, tls=tls)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], model
    finally:
        server.shutdown()
        server.server_close()
