"""The run journal's capture (model_journal.py, docs/journal.md): a journaled model call's request as the
upstream received it and its response as the upstream sent it, credentials masked (the secret's value is
in no journal entry, however it was echoed), bodies bounded and flagged when cut, a streamed response
copied as it passed, nothing journaled when the decision says 0, and entries kept on disk until the
control plane stored them, across a restart."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from mitmproxy import flow as mflow
from mitmproxy.test import tutils
from roster_gateway.client import ControlPlaneDown
from roster_gateway.journal_reporter import JournalReporter
from roster_gateway.outcome_journal import OutcomeJournal
from roster_gateway.wire import WireError, parse_decision

from tests import model_shapes as m
from tests.conftest import allow, journaled, make_flow, run_request, settle

SENTINEL = "sk-roster-SENTINELsentinelSENTINEL01"
REAL = "real-key-Zq8vP3kL0xW9mN4tRr77"
BODY = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}).encode()


def _model_allow(limit: int = 1 << 20, **over) -> dict:
    return allow(inject=[{"header": "authorization", "value": f"Bearer {REAL}"}],
                 replace=[{"sentinel": SENTINEL, "value": REAL}], journal_max_bytes=limit, **over)


def _chat_flow(body: bytes = BODY):
    return make_flow(method="POST", path="/v1/chat/completions", content=body,
                     headers=[("content-type", "application/json")])


def _b(part: dict) -> bytes:
    return base64.b64decode(part["body_b64"])


async def test_request_and_response_are_journaled_with_the_credential_masked(gw, cp):
    cp.decide = _model_allow()
    flow = await run_request(gw, _chat_flow())
    sent_headers = dict(flow.request.headers)
    assert sent_headers["authorization"] == f"Bearer {REAL}"  # the upstream gets the real value
    echo = f'{{"echo": "Bearer {REAL}", "b64": "{base64.b64encode(REAL.encode()).decode()}"}}'
    flow.response = tutils.tresp(content=m.chat_json()[:-1] + b"," + echo[1:].encode(),
                                 headers=[(b"content-type", b"application/json"), (b"x-echo", REAL.encode())])
    upstream_body = flow.response.content
    gw.response(flow)
    await settle(gw)
    [entry] = journaled(cp)
    assert REAL not in json.dumps(entry) and base64.b64encode(REAL.encode()).decode() not in json.dumps(entry)
    request = entry["request"]
    assert dict(request["headers"])["authorization"] == f"Bearer {SENTINEL}"
    assert _b(request) == BODY and request["truncated"] is False and request["size"] == len(BODY)
    assert request["url"] == f"http://{flow.request.headers['host']}/v1/chat/completions"
    response = entry["response"]
    assert response["status"] == 200 and response["masked"] >= 3
    assert _b(response) == upstream_body.replace(REAL.encode(), SENTINEL.encode()).replace(
        base64.b64encode(REAL.encode()), base64.b64encode(SENTINEL.encode()))
    assert entry["decision_id"] == "dc_1" and entry["ended"] >= entry["started"]


async def test_the_request_is_journaled_as_forwarded_though_masked_after_the_response(gw, cp):
    """Masking waits for finish(), off the call's way out; what it masks is the request as it was sent,
    whatever the flow's request object says by then."""
    cp.decide = _model_allow()
    flow = await run_request(gw, _chat_flow())
    flow.request.headers["authorization"] = "Bearer changed-later"
    flow.request.content = b"changed later"
    flow.response = tutils.tresp(content=m.chat_json())
    gw.response(flow)
    await settle(gw)
    [entry] = journaled(cp)
    assert REAL not in json.dumps(entry)
    assert dict(entry["request"]["headers"])["authorization"] == f"Bearer {SENTINEL}"
    assert _b(entry["request"]) == BODY and entry["request"]["masked"] >= 1


async def test_bodies_over_the_bound_are_kept_truncated_and_flagged(gw, cp):
    cp.decide = _model_allow(limit=10)
    flow = await run_request(gw, _chat_flow())
    flow.response = tutils.tresp(content=m.chat_json())
    gw.response(flow)
    await settle(gw)
    [entry] = journaled(cp)
    assert _b(entry["request"]) == BODY[:10] and entry["request"]["truncated"] is True
    assert entry["request"]["size"] == len(BODY)
    assert _b(entry["response"]) == m.chat_json()[:10] and entry["response"]["truncated"] is True


async def test_a_streamed_response_is_journaled_as_the_upstream_sent_it(gw, cp):
    cp.decide = _model_allow()
    body = json.dumps({"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "x"}]})
    flow = await run_request(gw, _chat_flow(body.encode()))
    flow.response = tutils.tresp(headers=[(b"content-type", b"text/event-stream")], content=b"")
    gw.responseheaders(flow)
    upstream = m.chat_sse(prompt=40, completion=2)
    to_box = b""
    for piece in [upstream[i:i + 23] for i in range(0, len(upstream), 23)] + [b""]:
        to_box += b"".join(flow.response.stream(piece))
    gw.response(flow)
    await settle(gw)
    [entry] = journaled(cp)
    assert _b(entry["response"]) == upstream and entry["response"]["streamed"] is True
    assert to_box != upstream  # the usage chunk the gateway asked for went to the journal, not the box


async def test_an_upstream_error_is_journaled_with_its_request(gw, cp):
    cp.decide = _model_allow()
    flow = await run_request(gw, _chat_flow())
    flow.error = mflow.Error(f"connection reset (Bearer {REAL})")
    gw.error(flow)
    await settle(gw)
    [entry] = journaled(cp)
    assert "response" not in entry and REAL not in json.dumps(entry) and "connection reset" in entry["error"]


@pytest.mark.parametrize("limit,path", [(0, "/v1/chat/completions"), (1 << 20, "/v1/files")])
async def test_nothing_is_journaled_when_the_decision_says_0_or_no_model_call(gw, cp, limit, path):
    cp.decide = _model_allow(limit=limit)
    flow = await run_request(gw, make_flow(method="POST", path=path, content=BODY,
                                           headers=[("content-type", "application/json")]))
    flow.response = tutils.tresp(content=m.chat_json())
    gw.response(flow)
    await settle(gw)
    assert journaled(cp) == [] and "roster_journal" not in flow.metadata


def test_a_negative_or_non_integer_bound_is_a_wire_error():
    assert parse_decision(allow(journal_max_bytes=5)).journal_max_bytes == 5
    assert parse_decision(allow()).journal_max_bytes == 0
    for bad in (-1, "5", True):
        with pytest.raises(WireError):
            parse_decision(allow(journal_max_bytes=bad))


class _Down:
    def __init__(self, down: int) -> None:
        self.down, self.sent = down, []

    async def journal(self, batch):
        self.sent.append([e["decision_id"] for e in batch])
        if self.down:
            self.down -= 1
            raise ControlPlaneDown("connection refused")
        return ["ok"] * len(batch)


def _reporter(client, path, tasks) -> JournalReporter:
    def spawn(coro):
        task = asyncio.ensure_future(coro)
        tasks.append(task)
        return task
    return JournalReporter(client, max_batch=4, flush_delay=0, spawn=spawn,
                           journal=OutcomeJournal(path, "journaled model call"), retry_delay=0.01)


async def test_entries_survive_a_restart_until_the_control_plane_stored_them(tmp_path):
    path, tasks = tmp_path / "model-journal.jsonl", []
    first = _reporter(_Down(10**6), path, tasks)
    first.send({"decision_id": "dc_1", "request": {"body_b64": ""}})
    first.send({"decision_id": "dc_2", "request": {"body_b64": ""}})
    await asyncio.sleep(0.05)
    for task in tasks:  # killed
        task.cancel()
    kept = {json.loads(line)["add"]["decision_id"] for line in path.read_text().splitlines()}
    assert kept == {"dc_1", "dc_2"}
    up, tasks = _Down(1), []
    second = _reporter(up, path, tasks)
    second.resume()
    while tasks:
        await tasks.pop()
    assert up.sent[-1] == ["dc_1", "dc_2"] and path.read_text() == ""
