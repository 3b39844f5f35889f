"""The run journal end to end through a real mitmdump (docs/journal.md): for each model call the journal's
request is byte for byte what the upstream received — the body exactly, every header exactly, except the
injected key, which stands as the secret's sentinel — and its response is exactly what the upstream sent
(a stream as its events, before the gateway removed the usage chunk it asked for); the key's value is
nowhere in the journal; a grant whose journal an admin turned off journals nothing."""

from __future__ import annotations

import pytest

from controlplane.journal.models import JournalBody, JournalCall
from controlplane.journal.records import call_bytes, run_records
from controlplane.policy.models import Grant
from tests.integration.gateway.conftest import SECRET_VALUE, box_client, grant, wait_until
from tests.integration.gateway.model_upstream import ModelUpstream

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def model():
    upstream = ModelUpstream()
    upstream.pause = 0.01
    yield upstream
    upstream.close()


@pytest.fixture
def journaled(stack, model, secret):
    model.requests.clear()
    model.sent.clear()
    grant("model-api", model, secret=secret, inject_header="authorization", inject_format="Bearer {secret}",
          schemes=["http"], methods=["POST"])
    return model


CASES = [("/v1/chat/completions", True), ("/v1/chat/completions", False), ("/v1/messages", True),
         ("/v1/responses", False)]


@pytest.mark.parametrize("path,stream", CASES, ids=[f"{p.rsplit('/', 1)[1]}-{s}" for p, s in CASES])
def test_the_journal_holds_what_the_upstream_received_and_sent(stack, journaled, secret, run_token, path,
                                                               stream):
    run, token = run_token
    doc = {"model": "gpt-4o", "stream": stream, "max_tokens": 50,
           "messages": [{"role": "user", "content": "hi"}], "input": "hi"}
    with box_client(stack.gateway, token) as client:
        response = client.post(journaled.url(path), json=doc, headers={"x-trace": "t1"})
    assert response.status_code == 200, response.text
    call = wait_until(lambda: JournalCall.objects.filter(run_id_ref=run.pk).first())
    assert call is not None, "the call was never journaled"
    received = journaled.requests[-1]
    request, answer, erased = call_bytes(call)
    assert not erased and request == received["body"] and answer == journaled.sent[-1]
    assert call.response_streamed is stream and call.status == 200 and call.request_masked >= 1
    headers = {name.lower(): value for name, value in call.request_headers}
    assert received["headers"]["authorization"] == f"Bearer {SECRET_VALUE}"
    assert headers.pop("authorization") == f"Bearer {secret.sentinel}"
    expected = {k: v for k, v in received["headers"].items() if k != "authorization"}
    assert headers == expected
    stored = b"".join(bytes(b.data) for b in JournalBody.objects.all())
    everything = stored + repr(call.request_headers).encode()
    assert SECRET_VALUE.encode() not in everything
    kinds = [r["type"] for r in run_records(run)]
    assert kinds[:2] == ["session_start", "user_turn"] and kinds[-1] == "assistant_turn"


def test_a_grant_whose_journal_is_off_journals_nothing(stack, journaled, run_token):
    run, token = run_token
    Grant.objects.filter(slug="model-api").update(journal=False)
    with box_client(stack.gateway, token) as client:
        response = client.post(journaled.url("/v1/chat/completions"),
                               json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 200
    assert wait_until(lambda: journaled.requests, timeout=5)
    assert not wait_until(lambda: JournalCall.objects.filter(run_id_ref=run.pk).exists(), timeout=2)
