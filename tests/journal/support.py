"""Journaled calls as the gateway posts them (docs/wire.md POST /journal), for the journal's tests."""

from __future__ import annotations

import base64
import json
import time

from tests.egress.fixtures import decide_body

JOURNAL = "/api/gateway/journal"


def part(body: bytes, **over) -> dict:
    doc = {"size": len(body), "truncated": False, "masked": 0, "body_b64": base64.b64encode(body).decode(),
           "headers": [["content-type", "application/json"]]}
    doc.update(over)
    return doc


def entry(decision_id: str, request: bytes, response: bytes | None, *, path="/v1/chat/completions",
          streamed=False, started=None, **over) -> dict:
    started = time.time() if started is None else started
    doc = {"decision_id": decision_id, "started": started, "ended": started + 0.5,
           "request": {"method": "POST", "url": f"https://api.openai.com{path}", **part(request)}}
    if response is not None:
        doc["response"] = {"status": 200, **part(response, streamed=streamed)}
    doc.update(over)
    return doc


def allowed(gateway, token, path="/v1/chat/completions") -> str:
    answer = gateway.decide(decide_body(token, path=path))
    assert answer["verdict"] == "allow", answer
    return answer["decision_id"]


def journal_call(gateway, token, request: dict | bytes, response: dict | bytes | None, **over) -> str:
    path = over.pop("path", "/v1/chat/completions")
    decision_id = allowed(gateway, token, path)
    raw = request if isinstance(request, bytes) else json.dumps(request).encode()
    answer = response if isinstance(response, bytes) or response is None else json.dumps(response).encode()
    posted = gateway.post(JOURNAL, {"entries": [entry(decision_id, raw, answer, path=path, **over)]})
    assert posted.status_code == 200 and posted.json() == {"results": ["ok"]}, posted.content
    return decision_id
