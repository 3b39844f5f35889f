"""Metering against the scripted model server (tools/scripted_model), through a real mitmdump: every wire
format it speaks, streamed and not, settles exactly the usage the server reported (it counts about four
request bytes a token, from the bytes it received, so the count also proves what reached it)."""

from __future__ import annotations

import json

import pytest

from controlplane.audit.models import AuditRecord
from tests.integration.gateway.conftest import SECRET_VALUE, box_client, grant, wait_until
from tools.scripted_model.script import estimate_tokens, script_parse
from tools.scripted_model.server import scripted_model_server

pytestmark = pytest.mark.integration
SAY = "Metered, every token of it."


class _Upstream:  # what conftest.grant needs to know about an upstream
    tls = False

    def __init__(self, port: int) -> None:
        self.port = port


@pytest.fixture
def scripted(stack, secret):
    script = script_parse({"model": "roster-scripted", "steps": [{"say": SAY}]})
    with scripted_model_server(script, SECRET_VALUE) as (port, model):
        grant("scripted-model", _Upstream(port), secret=secret, inject_header="authorization",
              inject_format="Bearer {secret}", schemes=["http"], methods=["POST"])
        yield port, model


def _settle_record(run) -> dict:
    def find():
        for record in AuditRecord.objects.filter(kind="spend", run_id_ref=run.pk):
            data = json.loads(record.body)["data"]
            if data.get("op") == "settle":
                return data["model"]
        return None
    return wait_until(find)


CASES = [("/v1/chat/completions", False, {"messages": [{"role": "user", "content": "hi"}]}),
         ("/v1/chat/completions", True, {"messages": [{"role": "user", "content": "hi"}]}),
         ("/v1/responses", True, {"input": "hi"}), ("/v1/responses", False, {"input": "hi"}),
         ("/v1/messages", True, {"max_tokens": 300, "messages": [{"role": "user", "content": "hi"}]}),
         ("/v1/messages", False, {"max_tokens": 300, "messages": [{"role": "user", "content": "hi"}]})]


@pytest.mark.parametrize("path,stream,fields", CASES,
                         ids=[f"{p.rsplit('/', 1)[1]}-{'sse' if s else 'json'}" for p, s, _ in CASES])
def test_scripted_model_usage_is_settled(stack, scripted, run_token, path, stream, fields):
    port, model = scripted
    run, token = run_token
    doc = {"model": "roster-scripted", "stream": stream, **fields}
    with box_client(stack.gateway, token) as client:
        response = client.post(f"http://127.0.0.1:{port}{path}", json=doc)
    assert response.status_code == 200, response.text
    assert model.records[-1]["authorized"] and model.records[-1]["stream"] is stream
    if not stream:
        assert SAY in response.text
    settled = _settle_record(run)
    assert settled is not None and settled["flagged"] is False, settled
    assert settled["output"] == estimate_tokens(SAY)
    assert settled["input"] >= estimate_tokens(json.dumps(doc, separators=(",", ":")))
    assert settled["tokens"] == settled["input"] + settled["output"]
    if stream and path.endswith("chat/completions"):
        assert '"prompt_tokens"' not in response.text  # the usage chunk it was asked for went to the ledger
