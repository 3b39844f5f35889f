"""Deny grants are walls across ports and schemes, and an intercepted CONNECT is recorded as a connection,
not as a deny: a real mitmdump, the real control plane, and what the recording upstream received."""

from __future__ import annotations

import json

import pytest

from controlplane.audit.models import AuditRecord
from controlplane.policy.models import Grant
from tests.integration.gateway.conftest import box_client, deny_body, grant

pytestmark = pytest.mark.integration


def test_a_deny_without_a_port_covers_every_port_of_its_host(stack, token):
    grant("wide-allow", stack.http, host="*.localhost.test", schemes=["http"])  # never matches 127.0.0.1
    grant("allow-this-port", stack.http, schemes=["http"])  # explicit port: more specific than the deny
    Grant.objects.create(slug="wall", host="127.0.0.1", mode="deny")  # no port, no schemes
    with box_client(stack.gateway, token) as box:
        response = box.get(stack.http.url("/v1/x"))
    assert response.status_code == 403 and deny_body(response)["reason"] == "denied_by_grant"
    assert stack.http.requests == []


def test_a_deny_with_a_port_leaves_the_other_ports(stack, token):
    grant("allow-this-port", stack.http, schemes=["http"])
    Grant.objects.create(slug="wall-other", host="127.0.0.1", port=stack.other.port, mode="deny")
    with box_client(stack.gateway, token) as box:
        allowed = box.get(stack.http.url("/v1/x"))
        denied = box.get(stack.other.url("/v1/x"))
    assert allowed.status_code == 200 and denied.status_code == 403
    assert [r["path"] for r in stack.http.requests] == ["/v1/x"] and stack.other.requests == []


def test_an_intercepted_connect_is_one_connection_record_and_its_request_one_allow(stack, run_token):
    run, token = run_token
    grant("tls", stack.https, host="localhost")
    with box_client(stack.gateway, token) as box:
        response = box.get(stack.https.url("/v1/x", host="localhost"))
    assert response.status_code == 200, response.text
    assert [r["path"] for r in stack.https.requests] == ["/v1/x"]
    records = AuditRecord.objects.filter(run_id_ref=run.pk)
    decisions = list(records.filter(kind="decision").values_list("verdict", "reason"))
    assert decisions == [("allow", "")]
    [connection] = AuditRecord.objects.filter(kind="connection", run_id_ref=run.pk)
    data = json.loads(connection.body)["data"]
    assert connection.verdict == "" and connection.reason == ""
    assert data["intercepted"] is True and "localhost" in data["url"]
