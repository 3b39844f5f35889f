"""Gemini's generateContent metered through a real mitmdump against the scripted model: the whole
answer, the SSE stream (`?alt=sse`) and the JSON-array stream each settle exactly the usageMetadata the
server reported, reserved at the body's size plus generationConfig.maxOutputTokens; the grant injects the
real key as `x-goog-api-key` and every byte of the answer reaches the box unchanged."""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from controlplane.audit.models import AuditRecord
from tests.integration.gateway.conftest import SECRET_VALUE, box_client, grant, wait_until
from tools.scripted_model.script import estimate_tokens, script_parse
from tools.scripted_model.server import scripted_model_server

pytestmark = pytest.mark.integration
SAY = "Metered by usageMetadata, every token of it, in several streamed pieces."
MAX_OUT = 333


class _Upstream:  # what conftest.grant needs to know about an upstream
    tls = False

    def __init__(self, port: int) -> None:
        self.port = port


@contextlib.contextmanager
def _cut_upstream():
    """An upstream whose Gemini stream stops after one piece without usage: no finishReason, closed."""
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):  # noqa: N802 - http.server's naming
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            piece = {"candidates": [{"content": {"parts": [{"text": "Half"}], "role": "model"}}]}
            self.wfile.write(b"data: " + json.dumps(piece).encode() + b"\r\n\r\n")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def scripted(stack, secret):
    script = script_parse({"model": "gemini-2.5-flash", "steps": [{"say": SAY}]})
    with scripted_model_server(script, SECRET_VALUE) as (port, model):
        grant("scripted-gemini", _Upstream(port), secret=secret, inject_header="x-goog-api-key",
              inject_format="{secret}", schemes=["http"], methods=["POST"], paths=["/v1beta/models/*"])
        yield port, model


def _settle_record(run) -> dict:
    def find():
        for record in AuditRecord.objects.filter(kind="spend", run_id_ref=run.pk):
            data = json.loads(record.body)["data"]
            if data.get("op") == "settle":
                return data["model"]
        return None
    return wait_until(find)


CASES = [(":generateContent", "json"), (":streamGenerateContent?alt=sse", "sse"),
         (":streamGenerateContent", "array")]


@pytest.mark.parametrize("method,shape", CASES, ids=[c[1] for c in CASES])
def test_gemini_usage_is_settled_exactly(stack, scripted, run_token, method, shape):
    port, model = scripted
    run, token = run_token
    doc = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
           "generationConfig": {"maxOutputTokens": MAX_OUT}}
    body = json.dumps(doc).encode()
    with box_client(stack.gateway, token) as client:
        url = f"http://127.0.0.1:{port}/v1beta/models/gemini-2.5-flash{method}"
        response = client.post(url, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    record = model.records[-1]
    assert record["authorized"] and record["api"] == "gemini" and record["stream"] is (shape != "json")
    text = response.text
    if shape == "sse":
        pieces = [json.loads(e.removeprefix("data: ")) for e in text.split("\r\n\r\n") if e]
    else:
        pieces = json.loads(text) if shape == "array" else [json.loads(text)]
    said = "".join(p.get("text", "") for doc_ in pieces for p in doc_["candidates"][0]["content"]["parts"])
    assert said == SAY and (len(pieces) > 1) is (shape != "json")  # byte for byte, piece by piece
    settled = _settle_record(run)
    assert settled is not None and settled["flagged"] is False, settled
    assert settled["usage"] == "reported" and settled["model"] == "gemini-2.5-flash"
    assert (settled["input"], settled["output"]) == (record["usage"]["input"], record["usage"]["output"])
    assert settled["output"] == estimate_tokens(SAY)
    assert settled["tokens"] == settled["input"] + settled["output"]
    assert settled["reserved_tokens"] == len(body) + MAX_OUT


def test_a_gemini_stream_cut_before_its_usage_settles_at_the_worst_case(stack, secret, run_token):
    run, token = run_token
    with _cut_upstream() as port:
        grant("cut-gemini", _Upstream(port), secret=secret, inject_header="x-goog-api-key",
              inject_format="{secret}", schemes=["http"], methods=["POST"], paths=["/v1beta/models/*"])
        doc = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
               "generationConfig": {"maxOutputTokens": MAX_OUT}}
        with box_client(stack.gateway, token) as client:
            client.post(f"http://127.0.0.1:{port}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
                        json=doc)
    settled = _settle_record(run)
    assert settled["flagged"] is True and settled["usage"] == "worst_case"
    assert settled["tokens"] == settled["reserved_tokens"]
