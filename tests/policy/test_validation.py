# ruff: noqa: E501 - one case per line reads best as a table
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controlplane.core.errors import ValidationFailed
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Worker
from controlplane.policy.validation import validate_grant
from controlplane.vault.models import Secret

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def refs():
    Worker.objects.create(name="w1")
    Secret.objects.create(name="oa", kind="openai", ciphertext=b"x", sentinel="sk-proj-test")


def test_a_full_grant_validates():
    spec = validate_grant({
        "host": "*.example.com", "port": 8443, "worker": "w1", "methods": ["GET", "POST"], "schemes": ["https"],
        "paths": ["/v1/**"], "mcp_tools": ["search"], "mode": "ask", "max_taint": "secret", "result_class": "public",
        "untrusted": False, "expires": "2026-12-31T23:59:00Z", "secret": "oa", "inject_header": "Authorization",
        "inject_format": "Bearer {secret}", "cost_per_call": 5, "trace": True, "enabled": False,
        "description": "d",
    }, slug="full")
    v = spec.values
    assert v["worker"].name == "w1" and v["secret"].name == "oa" and v["inject_header"] == "authorization"
    assert v["max_taint"] == DataClass.SECRET and v["result_class"] == DataClass.PUBLIC
    assert v["expires_at"] == datetime(2026, 12, 31, 23, 59, tzinfo=UTC)


def test_defaults():
    v = validate_grant({"host": "api.example.com"}, slug="d").values
    assert (v["mode"], v["max_taint"], v["result_class"], v["untrusted"], v["enabled"], v["tunnel"]) == (
        "auto", DataClass.PRIVATE, DataClass.PRIVATE, True, True, False)
    assert v["worker"] is None and v["secret"] is None and v["expires_at"] is None and v["port"] is None


BAD = [
    ("missing host", {}, "host", "required"),
    ("bad host pattern", {"host": "api.*.example.com"}, "host", "bad host pattern"),
    ("upper-case host", {"host": "API.example.com"}, "host", "canonical"),
    ("host with port", {"host": "api.example.com:443"}, "host", "bad host pattern"),
    ("host with trailing dot", {"host": "api.example.com."}, "host", "dot"),
    ("wildcard on a TLD", {"host": "*.com"}, "host", "two labels"),
    ("unknown method", {"host": "a.example.com", "methods": ["FETCH"]}, "methods", "unknown method"),
    ("lower-case method", {"host": "a.example.com", "methods": ["get"]}, "methods", "unknown method"),
    ("unknown scheme", {"host": "a.example.com", "schemes": ["ftp"]}, "schemes", "unknown scheme"),
    ("methods not a list", {"host": "a.example.com", "methods": "GET"}, "methods", "list of strings"),
    ("duplicate path", {"host": "a.example.com", "paths": ["/a", "/a"]}, "paths", "twice"),
    ("port out of range", {"host": "a.example.com", "port": 70000}, "port", "out of range"),
    ("port zero", {"host": "a.example.com", "port": 0}, "port", "out of range"),
    ("port as text", {"host": "a.example.com", "port": "443"}, "port", "out of range"),
    ("bad path pattern", {"host": "a.example.com", "paths": ["v1/*"]}, "paths", "start with '/'"),
    ("inner double star", {"host": "a.example.com", "paths": ["/a/**/b"]}, "paths", "trailing"),
    ("non-canonical path", {"host": "a.example.com", "paths": ["/a/../b"]}, "paths", "canonical"),
    ("bad mode", {"host": "a.example.com", "mode": "maybe"}, "mode", "auto, ask or deny"),
    ("bad taint", {"host": "a.example.com", "max_taint": "top"}, "max_taint", "public, private or secret"),
    ("bool as text", {"host": "a.example.com", "untrusted": "no"}, "untrusted", "true or false"),
    ("negative cost", {"host": "a.example.com", "cost_per_call": -1}, "cost_per_call", "0 or more"),
    ("float cost", {"host": "a.example.com", "cost_per_call": 1.5}, "cost_per_call", "whole number"),
    ("secret without header", {"host": "a.example.com", "secret": "oa"}, "inject_header", "needs inject_header"),
    ("header without secret", {"host": "a.example.com", "inject_header": "x-key"}, "inject_header", "no secret"),
    ("forbidden header", {"host": "a.example.com", "secret": "oa", "inject_header": "Host"}, "inject_header", "gateway"),
    ("bad header name", {"host": "a.example.com", "secret": "oa", "inject_header": "x key"}, "inject_header", "valid header"),
    ("format without placeholder", {"host": "a.example.com", "secret": "oa", "inject_header": "x-key", "inject_format": "Bearer"}, "inject_format", "{secret}"),
    ("format with other braces", {"host": "a.example.com", "secret": "oa", "inject_header": "x-key", "inject_format": "{secret}{x}"}, "inject_format", "{secret}"),
    ("format with newline", {"host": "a.example.com", "secret": "oa", "inject_header": "x-key", "inject_format": "{secret}\r\nX: y"}, "inject_format", "control"),
    ("unknown secret", {"host": "a.example.com", "secret": "nope", "inject_header": "x-key"}, "secret", "unknown secret"),
    ("unknown worker", {"host": "a.example.com", "worker": "nope"}, "worker", "unknown worker"),
    ("tunnel with paths", {"host": "a.example.com", "tunnel": True, "paths": ["/x"]}, "paths", "tunnel"),
    ("tunnel with methods", {"host": "a.example.com", "tunnel": True, "methods": ["GET"]}, "methods", "tunnel"),
    ("tunnel with tools", {"host": "a.example.com", "tunnel": True, "mcp_tools": ["t"]}, "mcp_tools", "tunnel"),
    ("tunnel with secret", {"host": "a.example.com", "tunnel": True, "secret": "oa", "inject_header": "x-key"}, "secret", "tunnel"),
    ("expiry without offset", {"host": "a.example.com", "expires": "2026-12-31T23:59:00"}, "expires", "RFC 3339"),
    ("expiry as a date", {"host": "a.example.com", "expires": "2026-12-31"}, "expires", "RFC 3339"),
    ("expiry impossible", {"host": "a.example.com", "expires": "2026-02-30T00:00:00Z"}, "expires", "real date"),
    ("unknown key", {"host": "a.example.com", "hosts": ["x"]}, "hosts", "unknown field"),
    ("bad mcp tool", {"host": "a.example.com", "mcp_tools": ["a b"]}, "mcp_tools", "not valid"),
]


@pytest.mark.parametrize(("name", "data", "field", "fragment"), BAD, ids=[b[0] for b in BAD])
def test_bad_grants_name_the_field(name, data, field, fragment):
    with pytest.raises(ValidationFailed) as info:
        validate_grant(data, slug="g")
    assert field in info.value.errors, info.value.errors
    assert fragment in info.value.errors[field]


def test_every_error_is_reported_at_once():
    with pytest.raises(ValidationFailed) as info:
        validate_grant({"host": "", "port": 0, "mode": "x", "methods": ["get"]}, slug="Bad Slug")
    assert {"slug", "host", "port", "mode", "methods"} <= set(info.value.errors)
