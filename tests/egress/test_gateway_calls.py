"""The gateway's per-request calls (/decide, /outcomes, /journal) have one route each
(controlplane.egress.gateway_calls), served by the ASGI app without Django's request machinery: it answers
every refusal itself, in the gateway API's shapes, and decides or stores nothing for a refused call; a
WSGI caller (the test client) reaches the same route."""

import json
import re

import pytest
from django.test import Client

from controlplane.audit.models import AuditRecord
from controlplane.fleet.models import RunDecision
from controlplane.journal.models import JournalCall
from controlplane.ledger.models import Cap
from tests.conftest import GATEWAY_SERVICE_TOKEN
from tests.egress.asgi_call import AUTH, JSON, asgi_call
from tests.egress.fixtures import decide_body
from tests.journal.support import JOURNAL, entry

pytestmark = pytest.mark.django_db(transaction=True)

DECIDE = "/api/gateway/decide"
OUTCOMES = "/api/gateway/outcomes"


def _wsgi_call(path: str, body: bytes, auth: str | None = f"Bearer {GATEWAY_SERVICE_TOKEN}",
               method: str = "POST") -> tuple[int, bytes]:
    extra = {"HTTP_AUTHORIZATION": auth} if auth is not None else {}
    response = Client().generic(method, path, body, content_type="application/json", **extra)
    return response.status_code, response.content


def _without_ids(body: bytes) -> bytes:
    return re.sub(rb'"(decision_id|approval_id)": "[^"]+"', rb'"\1": "X"', body)


def test_every_kind_of_answer_is_the_same_over_asgi_and_wsgi(token, secret, make_grant, worker):
    make_grant(secret=secret, inject_header="authorization", inject_format="Bearer {secret}")
    make_grant(slug="ask-me", host="ask.example.com", mode="ask")
    bodies = [decide_body(token), decide_body(token, host="nowhere.example.com"),
              decide_body(token, host="ask.example.com"), decide_body("not-a-live-token")]
    for body in bodies:
        status, headers, asgi = asgi_call(DECIDE, json.dumps(body).encode())
        assert status == 200 and headers["content-type"] == "application/json; charset=utf-8"
        wsgi_status, wsgi = _wsgi_call(DECIDE, json.dumps(body).encode())
        assert (wsgi_status, _without_ids(wsgi)) == (200, _without_ids(asgi))
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=1)
    answer = json.loads(asgi_call(DECIDE, json.dumps(decide_body(token)).encode())[2])
    assert answer["reason"] == "over_budget" and answer["budget"]["limit"] == 1


def test_outcomes_settle_once_over_either_transport(token, secret, make_grant):
    make_grant(secret=secret)
    ids = [json.loads(asgi_call(DECIDE, json.dumps(decide_body(token)).encode())[2])["decision_id"]
           for _ in range(2)]

    def outcomes(decision_id):
        return json.dumps({"outcomes": [{"decision_id": decision_id, "status": 200, "request_bytes": 1,
                                         "response_bytes": 2, "error": ""},
                                        {"decision_id": "unknown", "status": 200, "request_bytes": 1,
                                         "response_bytes": 2, "error": ""}]}).encode()
    assert asgi_call(OUTCOMES, outcomes(ids[0]))[::2] == (200, b'{"results": ["ok", "unknown"]}')
    assert _wsgi_call(OUTCOMES, outcomes(ids[1])) == (200, b'{"results": ["ok", "unknown"]}')
    again = b'{"results": ["already_settled", "unknown"]}'
    assert asgi_call(OUTCOMES, outcomes(ids[1]))[2] == again
    assert _wsgi_call(OUTCOMES, outcomes(ids[0]))[1] == again


@pytest.mark.parametrize("path", [DECIDE, OUTCOMES, JOURNAL])
@pytest.mark.parametrize("case", ["wrong token", "two bearers", "basic scheme", "no auth", "empty bearer"])
def test_anything_but_the_gateways_one_bearer_is_401_and_decides_nothing(token, make_grant, path, case):
    make_grant()
    headers = {"wrong token": [(b"authorization", b"Bearer nope"), JSON],
               "two bearers": [AUTH, AUTH, JSON],
               "basic scheme": [(b"authorization", b"Basic " + GATEWAY_SERVICE_TOKEN.encode()), JSON],
               "no auth": [JSON],
               "empty bearer": [(b"authorization", b"Bearer "), JSON]}[case]
    before = AuditRecord.objects.count()
    status, _, body = asgi_call(path, json.dumps(decide_body(token)).encode(), headers=headers)
    assert (status, body) == (401, b'{"detail": "Unauthorized"}')
    assert AuditRecord.objects.count() == before and not RunDecision.objects.exists()
    assert not JournalCall.objects.exists()


def test_a_journal_entry_is_stored_once_over_either_transport(token, make_grant):
    make_grant()
    ids = [json.loads(asgi_call(DECIDE, json.dumps(decide_body(token)).encode())[2])["decision_id"]
           for _ in range(2)]

    def journal(decision_id):
        return json.dumps({"entries": [entry(decision_id, b'{"model": "m"}', b'{"ok": true}'),
                                       entry("dc_unknown", b"{}", None)]}).encode()
    assert asgi_call(JOURNAL, journal(ids[0]))[::2] == (200, b'{"results": ["ok", "unknown"]}')
    assert _wsgi_call(JOURNAL, journal(ids[1])) == (200, b'{"results": ["ok", "unknown"]}')
    again = b'{"results": ["already_settled", "unknown"]}'
    assert asgi_call(JOURNAL, journal(ids[1]))[2] == again
    assert _wsgi_call(JOURNAL, journal(ids[0]))[1] == again
    assert JournalCall.objects.count() == 2


@pytest.mark.parametrize(("case", "fields"), [
    ("bad base64", ["entries.0.request.body_b64: Value error, body_b64 is not valid base64"]),
    ("five entries", ["entries: List should have at most 4 items after validation, not 5"]),
    ("no entries", ["entries: List should have at least 1 item after validation, not 0"]),
])
def test_a_refused_journal_names_the_field_never_the_input_and_stores_nothing(token, make_grant, case,
                                                                             fields):
    make_grant()
    decision_id = json.loads(asgi_call(DECIDE, json.dumps(decide_body(token)).encode())[2])["decision_id"]
    good = entry(decision_id, b'{"model": "secret-looking input"}', None)
    entries = {"bad base64": [{**good, "request": {**good["request"], "body_b64": "not base64!"}}],
               "five entries": [good] * 5, "no entries": []}[case]
    body = json.dumps({"entries": entries}).encode()
    before = AuditRecord.objects.count()
    status, _, answer = asgi_call(JOURNAL, body)
    assert status == 422 and b"secret-looking" not in answer and b"not base64!" not in answer
    assert json.loads(answer) == {"detail": "invalid request", "fields": fields}
    assert _wsgi_call(JOURNAL, body) == (422, answer)
    assert AuditRecord.objects.count() == before and not JournalCall.objects.exists()


@pytest.mark.parametrize(("case", "status", "fields"), [
    ("unknown field", 422, ["extra: Extra inputs are not permitted"]),
    ("bad json", 400, None),
    ("lower-case method", 422, ["method: String should match pattern '^[A-Z][A-Z-]{0,15}$'"]),
    ("not an object", 422, ["(request): Input should be a valid dictionary or instance of DecideIn"]),
    ("empty", 422, ["(request): Field required"]),
])
def test_a_refused_body_names_the_field_never_the_input_and_decides_nothing(token, make_grant, case, status,
                                                                           fields):
    make_grant()
    body = {"unknown field": json.dumps({**decide_body(token), "extra": 1}).encode(),
            "bad json": b'{"token": "' + token.encode(),
            "lower-case method": json.dumps(decide_body(token, method="get")).encode(),
            "not an object": b"[1, 2]",
            "empty": b""}[case]
    before = AuditRecord.objects.count()
    answer = asgi_call(DECIDE, body)
    assert answer[0] == status and token.encode() not in answer[2]
    expected = {"detail": "Cannot parse request body"} if fields is None else {"detail": "invalid request",
                                                                               "fields": fields}
    assert json.loads(answer[2]) == expected
    assert _wsgi_call(DECIDE, body) == (status, answer[2])  # the same route over WSGI
    assert AuditRecord.objects.count() == before


def test_another_method_is_405_naming_post_and_an_oversized_body_is_400(settings, token, make_grant):
    make_grant()
    status, headers, body = asgi_call(DECIDE, b"", method="GET")
    assert (status, headers["allow"], body) == (405, "POST", b'{"detail": "Method not allowed"}')
    assert _wsgi_call(DECIDE, b"", method="GET") == (405, body)
    decide = json.dumps(decide_body(token)).encode()
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(decide) - 1
    half = len(decide) // 2
    for sent in (decide, [decide[:half], decide[half:]]):  # at once, or in chunks that only add up past it
        assert asgi_call(DECIDE, sent)[::2] == (400, b'{"detail": "request body too large"}')
    assert _wsgi_call(DECIDE, decide) == (400, b'{"detail": "request body too large"}')
    assert not AuditRecord.objects.filter(kind="decision").exists()


def test_a_body_in_chunks_is_decided_whole(token, make_grant):
    make_grant()
    body = json.dumps(decide_body(token)).encode()
    status, _, answer = asgi_call(DECIDE, [body[:10], body[10:40], body[40:]])
    assert status == 200 and json.loads(answer)["verdict"] == "allow"


def test_the_rest_of_the_gateway_api_is_djangos_and_other_paths_are_404():
    status, _, body = asgi_call("/api/gateway/health", b"", method="GET")
    assert status == 200 and json.loads(body)["ok"] is True
    assert asgi_call("/api/gateway/health", b"", headers=[], method="GET")[0] == 401
    assert asgi_call("/admin/", b"", method="GET")[0] == 404
