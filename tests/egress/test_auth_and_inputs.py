"""The service credential, and bodies that must be refused before anything is decided."""

import hashlib

import pytest

from controlplane.audit.models import AuditRecord
from controlplane.fleet.models import RunDecision
from tests.egress.fixtures import DECIDE, decide_body

pytestmark = pytest.mark.django_db

ROUTES = [("post", DECIDE), ("post", "/api/gateway/outcome"), ("post", "/api/gateway/trace"),
          ("post", "/api/gateway/approvals/00000000-0000-0000-0000-000000000000/wait"),
          ("post", "/api/gateway/approvals/00000000-0000-0000-0000-000000000000/abandon"),
          ("get", "/api/gateway/health")]


def _call(gateway, method, path, headers):
    if method == "get":
        return gateway.get(path, headers=headers)
    return gateway.post(path, decide_body("rt_x"), headers=headers)


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"},
                                     {"Authorization": "Bearer "}])
def test_wrong_or_missing_service_token_is_401(gateway, method, path, headers):
    assert _call(gateway, method, path, headers).status_code == 401
    assert not AuditRecord.objects.exists()


def test_empty_configured_hash_refuses_everyone(gateway, settings, token, make_grant):
    make_grant()
    settings.ROSTER_GATEWAY_TOKEN_SHA256 = ""
    assert gateway.post(DECIDE, decide_body(token)).status_code == 401


def test_hash_of_the_empty_token_does_not_open_the_door(gateway, settings):
    settings.ROSTER_GATEWAY_TOKEN_SHA256 = hashlib.sha256(b"").hexdigest()
    assert gateway.post(DECIDE, decide_body("rt_x"), headers={"Authorization": "Bearer "}).status_code == 401


def test_health(gateway):
    response = gateway.get("/api/gateway/health")
    assert response.status_code == 200 and response.json()["ok"] is True
    assert response.json()["limits"]["outcome_batch_max"] == 256


BAD_BODIES = {
    "unknown field": {"surprise": 1},
    "float port": {"port": 443.0},
    "string port": {"port": "443"},
    "port out of range": {"port": 70000},
    "negative body size": {"body_size": -1},
    "float body size": {"body_size": 1.5},
    "bool body size": {"body_size": True},
    "lowercase method": {"method": "get"},
    "long method": {"method": "A" * 40},
    "bad scheme": {"scheme": "ftp"},
    "empty host": {"host": ""},
    "long host": {"host": "a" * 400},
    "bad sha": {"body_sha256": "XYZ"},
    "header not a pair": {"headers": [["a"]]},
    "header triple": {"headers": [["a", "b", "c"]]},
    "header number": {"headers": [["a", 1]]},
    "too many headers": {"headers": [["a", "b"]] * 1000},
    "huge header": {"headers": [["a", "b" * 100_000]]},
    "huge path": {"path": "/" + "a" * 100_000},
    "huge preview": {"body_preview": "x" * 100_000},
    "huge token": {"token": "rt_" + "a" * 5000},
    "mcp unknown field": {"mcp": [{"method": "tools/call", "tool": "x", "extra": 1}]},
    "mcp missing tool": {"mcp": [{"method": "tools/call"}]},
    "null token": {"token": None},
}


@pytest.mark.parametrize("change", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_malformed_decide_bodies_are_422_and_change_nothing(gateway, token, make_grant, change):
    make_grant()
    body = decide_body(token)
    body.update(change)
    response = gateway.post(DECIDE, body)
    assert response.status_code == 422, response.content
    assert not AuditRecord.objects.filter(kind="decision").exists()
    assert not RunDecision.objects.exists()


@pytest.mark.parametrize("missing", ["token", "method", "host", "port", "path", "headers", "mcp"])
def test_missing_fields_are_422(gateway, token, missing):
    body = decide_body(token)
    del body[missing]
    assert gateway.post(DECIDE, body).status_code == 422


@pytest.mark.parametrize("raw", ["not json", "[]", "null", '{"token": '])
def test_non_object_bodies_are_refused(gateway, raw):
    assert gateway.post(DECIDE, raw).status_code in (400, 422)
    assert not AuditRecord.objects.exists()


def test_hostile_but_valid_shapes_are_denied_not_errors(gateway, token, make_grant):
    make_grant()
    for change in ({"host": "api.openai.com."}, {"host": "API.OPENAI.COM"}, {"path": "/v1/%2e%2e/admin"},
                   {"host": "api.openai.com\x00.evil"}, {"path": "no-leading-slash"}):
        answer = gateway.decide(decide_body(token, **change))
        assert answer["verdict"] in ("allow", "deny") and answer["status"] in (200, 403)


@pytest.mark.parametrize("change,field", [({"path": "/" + "a" * 100_000}, "path"),
                                          ({"headers": [["a", "b"]] * 1000}, "headers"),
                                          ({"token": "rt_SECRET-LOOKING-" + "a" * 5000}, "token")],
                         ids=["path", "headers", "token"])
def test_a_422_names_the_field_and_rule_only(gateway, token, change, field):
    """No framework `loc` shapes (body / parameter names), and never the input itself."""
    body = decide_body(token)
    body.update(change)
    response = gateway.post(DECIDE, body)
    assert response.status_code == 422
    answer = response.json()
    assert answer["detail"] == "invalid request"
    assert [f.split(":")[0] for f in answer["fields"]] == [field]
    assert "loc" not in response.text and '"body"' not in response.text
    assert "SECRET-LOOKING" not in response.text and "aaaa" not in response.text
