"""The gateway's two hot calls answered without django-ninja (controlplane.egress.fast_routes) answer
byte for byte what the ordinary routes answer, and anything unusual still gets the ordinary route's
answer: a wrong or doubled bearer, a refused field, bad JSON, another method, an oversized body."""

import asyncio
import json
import re

import pytest

from controlplane.audit.models import AuditRecord
from controlplane.egress import fast_routes
from controlplane.egress.asgi import gateway_only
from controlplane.ledger.models import Cap
from tests.conftest import GATEWAY_SERVICE_TOKEN
from tests.egress.fixtures import decide_body

pytestmark = pytest.mark.django_db(transaction=True)

AUTH = (b"authorization", f"Bearer {GATEWAY_SERVICE_TOKEN}".encode())
JSON = (b"content-type", b"application/json")


def _call(path: str, body: bytes, headers=(AUTH, JSON), method: str = "POST") -> tuple[int, bytes]:
    async def run():
        scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
                 "query_string": b"", "headers": list(headers), "root_path": "", "scheme": "http",
                 "server": ("127.0.0.1", 8002), "client": ("127.0.0.1", 40000), "http_version": "1.1",
                 "asgi": {"version": "3.0"}}
        incoming = [{"type": "http.request", "body": body, "more_body": False}]
        sent = []

        async def receive():
            if incoming:
                return incoming.pop(0)
            await asyncio.sleep(3600)  # the client stays connected

        async def send(message):
            sent.append(message)

        await gateway_only()(scope, receive, send)
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])
    return asyncio.run(run())


def _both(monkeypatch, path: str, body: bytes, **kwargs) -> tuple[tuple[int, bytes], tuple[int, bytes]]:
    fast = _call(path, body, **kwargs)
    with monkeypatch.context() as patched:
        patched.setattr(fast_routes, "ROUTES", {})  # only django-ninja's routes now
        patched.setattr("controlplane.egress.asgi.ROUTES", {})
        ordinary = _call(path, body, **kwargs)
    return fast, ordinary


def _same_but_ids(a: bytes, b: bytes) -> None:
    uuid = re.compile(rb'"(decision_id|approval_id)": "[^"]+"')
    assert uuid.sub(rb'"\1": "X"', a) == uuid.sub(rb'"\1": "X"', b)


def test_every_kind_of_answer_is_the_same_bytes_as_the_ordinary_route(monkeypatch, token, secret, make_grant,
                                                                       worker):
    make_grant(secret=secret, inject_header="authorization", inject_format="Bearer {secret}")
    make_grant(slug="ask-me", host="ask.example.com", mode="ask")
    bodies = [decide_body(token), decide_body(token, host="nowhere.example.com"),
              decide_body(token, host="ask.example.com"), decide_body("not-a-live-token")]
    for body in bodies:
        fast, ordinary = _both(monkeypatch, "/api/gateway/decide", json.dumps(body).encode())
        assert fast[0] == ordinary[0] == 200
        _same_but_ids(fast[1], ordinary[1])
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=1)
    fast, ordinary = _both(monkeypatch, "/api/gateway/decide", json.dumps(decide_body(token)).encode())
    assert json.loads(fast[1])["reason"] == "over_budget" and json.loads(fast[1])["budget"]["limit"] == 1
    _same_but_ids(fast[1], ordinary[1])


def test_outcomes_are_the_same_bytes_as_the_ordinary_route(monkeypatch, token, secret, make_grant):
    make_grant(secret=secret)
    ids = [json.loads(_call("/api/gateway/decide", json.dumps(decide_body(token)).encode())[1])["decision_id"]
           for _ in range(2)]

    def outcomes(decision_id):
        return json.dumps({"outcomes": [{"decision_id": decision_id, "status": 200, "request_bytes": 1,
                                         "response_bytes": 2, "error": ""},
                                        {"decision_id": "unknown", "status": 200, "request_bytes": 1,
                                         "response_bytes": 2, "error": ""}]}).encode()
    fast = _call("/api/gateway/outcomes", outcomes(ids[0]))
    with monkeypatch.context() as patched:
        patched.setattr("controlplane.egress.asgi.ROUTES", {})
        ordinary = _call("/api/gateway/outcomes", outcomes(ids[1]))
    assert fast == ordinary == (200, b'{"results": ["ok", "unknown"]}')
    again = _call("/api/gateway/outcomes", outcomes(ids[0]))[1]
    assert again == b'{"results": ["already_settled", "unknown"]}'


@pytest.mark.parametrize("case", ["wrong token", "two bearers", "basic scheme", "no auth"])
def test_a_doubtful_bearer_gets_the_ordinary_refusal_and_decides_nothing(monkeypatch, token, make_grant,
                                                                          case):
    make_grant()
    headers = {"wrong token": [(b"authorization", b"Bearer nope"), JSON],
               "two bearers": [AUTH, AUTH, JSON],
               "basic scheme": [(b"authorization", b"Basic " + GATEWAY_SERVICE_TOKEN.encode()), JSON],
               "no auth": [JSON]}[case]
    before = AuditRecord.objects.count()
    fast, ordinary = _both(monkeypatch, "/api/gateway/decide", json.dumps(decide_body(token)).encode(),
                           headers=headers)
    assert fast == ordinary and fast[0] == 401
    assert AuditRecord.objects.count() == before


@pytest.mark.parametrize("case", ["unknown field", "bad json", "lower-case method", "not an object", "empty"])
def test_a_refused_body_gets_the_ordinary_422_and_decides_nothing(monkeypatch, token, make_grant, case):
    make_grant()
    body = {"unknown field": json.dumps({**decide_body(token), "extra": 1}).encode(),
            "bad json": b'{"token": ',
            "lower-case method": json.dumps(decide_body(token, method="get")).encode(),
            "not an object": b"[1, 2]",
            "empty": b""}[case]
    before = AuditRecord.objects.count()
    fast, ordinary = _both(monkeypatch, "/api/gateway/decide", body)
    assert fast == ordinary and fast[0] in (400, 422)
    assert AuditRecord.objects.count() == before


def test_other_methods_and_oversized_bodies_take_the_ordinary_route(monkeypatch, settings, token, make_grant):
    make_grant()
    assert _call("/api/gateway/decide", b"", method="GET")[0] == 405
    body = json.dumps(decide_body(token)).encode()
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(body) - 1
    fast, ordinary = _both(monkeypatch, "/api/gateway/decide", body)
    assert fast == ordinary and fast[0] == 400
