"""A real mitmdump with the addon against the real control plane: allow, every deny reason the box can
meet, 402 with the cap, 407, a dead or silent control plane, one of two replicas dead, and the health
endpoint."""

from __future__ import annotations

import time
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from controlplane.audit.models import AuditRecord
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_raise_taint, run_set_status
from controlplane.ledger.models import Cap, SpendLine
from tests.integration.gateway.conftest import box_client, deny_body, extra_gateway, grant, wait_until
from tests.integration.gateway.upstreams import SilentServer
from tests.support import procs

pytestmark = pytest.mark.integration


def test_allow_plain_http_reaches_upstream_without_proxy_credentials(stack, token):
    grant("plain", stack.http, methods=["GET"])
    with box_client(stack.gateway, token) as box:
        response = box.get(stack.http.url("/v1/things?x=1"))
    assert response.status_code == 200, response.text
    [seen] = stack.http.requests
    assert seen["path"] == "/v1/things?x=1"
    assert "proxy-authorization" not in seen["headers"]
    assert token not in stack.http.seen_text()
    assert AuditRecord.objects.filter(kind="decision", verdict="allow").exists()
    # The outcome is reported in the background and settles the reservation.
    assert wait_until(lambda: SpendLine.objects.filter(kind="settle").exists())


def test_taint_from_an_allow_applies_to_the_next_request_and_outcomes_settle_in_batches(stack, run_token):
    """The decision raises the run's taint (no waiting for the outcome); the gateway's batched
    /outcomes settle every call's real bytes."""
    run, token = run_token
    grant("secret-source", stack.http, result_class=DataClass.SECRET, max_taint=DataClass.SECRET)
    grant("public-sink", stack.other, max_taint=DataClass.PRIVATE)
    with box_client(stack.gateway, token) as box:
        first = [box.post(stack.http.url(f"/v1/read/{i}"), content=b"x" * i) for i in range(1, 4)]
        sink = box.get(stack.other.url("/v1/post"))
    assert [r.status_code for r in first] == [200, 200, 200]
    assert sink.status_code == 403 and deny_body(sink)["reason"] == "taint_too_high"
    assert stack.other.requests == []
    run.refresh_from_db()
    assert run.taint == DataClass.SECRET
    assert wait_until(lambda: SpendLine.objects.filter(kind="settle").count() == 3)
    sizes = sorted(SpendLine.objects.filter(kind="settle").values_list("amount", flat=True))
    bodies = [len(r.content) for r in first]
    assert sizes == sorted(i + b for i, b in zip(range(1, 4), bodies, strict=True))


def test_allow_intercepted_https(stack, token):
    grant("tls", stack.https, host="localhost")
    with box_client(stack.gateway, token) as box:
        response = box.post(stack.https.url("/v1/chat", host="localhost"), json={"q": 1})
    assert response.status_code == 200, response.text
    [seen] = stack.https.requests
    assert seen["method"] == "POST" and seen["body"] == b'{"q":1}'


DENIALS = [
    ("no_grant", {}, None),
    ("grant_expired", {"expires_at": -60}, None),
    ("denied_by_grant", {"mode": "deny"}, None),
    ("taint_too_high", {"max_taint": DataClass.PRIVATE}, DataClass.SECRET),
]


@pytest.mark.parametrize("reason,fields,taint", DENIALS, ids=[d[0] for d in DENIALS])
def test_each_deny_reason_is_a_legible_403_and_nothing_reaches_upstream(stack, run_token, reason, fields,
                                                                          taint):
    run, token = run_token
    if reason != "no_grant":
        fields = dict(fields)
        if "expires_at" in fields:
            fields["expires_at"] = timezone.now() + timedelta(seconds=fields["expires_at"])
        grant(f"g-{reason.replace('_', '-')}", stack.http, **fields)
    if taint is not None:
        run_raise_taint(run.pk, taint, untrusted=False)
    with box_client(stack.gateway, token) as box:
        response = box.get(stack.http.url("/v1/x"))
    assert response.status_code == 403, response.text
    body = deny_body(response)
    assert body["reason"] == reason and body["message"]
    assert stack.http.requests == []


def test_unusual_port_without_a_grant_is_denied(stack, token):
    grant("plain", stack.http)
    with box_client(stack.gateway, token) as box:
        response = box.get(stack.other.url("/"))  # same host, the other upstream's port
    assert response.status_code == 403 and deny_body(response)["reason"] == "no_grant"
    assert stack.other.requests == []


def test_over_budget_is_402_with_the_cap(stack, run_token):
    run, token = run_token
    grant("metered", stack.http)
    Cap.objects.create(worker=run.worker, unit="requests", window="day", limit=1)
    with box_client(stack.gateway, token) as box:
        first = box.get(stack.http.url("/1"))
        second = box.get(stack.http.url("/2"))
    assert first.status_code == 200
    assert second.status_code == 402, second.text
    body = deny_body(second)
    assert body["reason"] == "over_budget"
    assert body["budget"]["unit"] == "requests" and body["budget"]["limit"] == 1
    assert [r["path"] for r in stack.http.requests] == ["/1"]


@pytest.mark.parametrize("who", ["no credentials", "unknown token", "ended run"])
def test_bad_identity_is_407_and_nothing_forwarded(stack, run_token, who):
    run, token = run_token
    grant("plain", stack.http)
    if who == "unknown token":
        token = "rt_not_a_real_token"
    elif who == "ended run":
        run_set_status(run.pk, Run.Status.SUCCEEDED)
    with box_client(stack.gateway, None if who == "no credentials" else token) as box:
        plain = box.get(stack.http.url("/"))
    assert plain.status_code == 407, plain.text
    assert plain.headers["proxy-authenticate"].lower().startswith("basic")
    assert deny_body(plain)["reason"] == "bad_token"
    with box_client(stack.gateway, None if who == "no credentials" else token) as box:
        with pytest.raises(httpx.ProxyError):
            box.get(stack.https.url("/", host="localhost"))  # the CONNECT itself is refused
    assert stack.http.requests == [] and stack.https.requests == []


def test_control_plane_unreachable_is_a_prompt_503(stack, token, tmp_path):
    dead = f"http://127.0.0.1:{procs.free_port()}"
    with extra_gateway(dead, tmp_path, allow_loopback_upstreams=True) as gw, box_client(gw, token) as box:
        start = time.monotonic()
        response = box.get(stack.http.url("/"))
        elapsed = time.monotonic() - start
        health = httpx.get(gw.health_url, timeout=5)
    print(f"\ncontrol plane unreachable: denied in {elapsed * 1000:.1f} ms")
    assert response.status_code == 503
    assert deny_body(response)["reason"] == "control_plane_unavailable"
    assert health.status_code == 503 and health.json()["control_plane"] is False
    assert stack.http.requests == []


def test_with_one_replica_dead_the_other_decides_and_settles_every_call(stack, token, tmp_path):
    """roster_control_plane lists a dead replica and the real decision API: every call (health, sentinels,
    /decide, /outcomes) goes to the one that answers, and the box sees no difference."""
    grant("plain", stack.http, methods=["GET"])
    dead = f"http://127.0.0.1:{procs.free_port()}"
    with extra_gateway(f"{dead},{stack.control_plane_url}", tmp_path, allow_loopback_upstreams=True) as gw, \
            box_client(gw, token) as box:
        responses = [box.get(stack.http.url(f"/v1/replica/{i}")) for i in range(4)]
        health = httpx.get(gw.health_url, timeout=5)
        assert wait_until(lambda: SpendLine.objects.filter(kind="settle").count() == 4)
    assert [r.status_code for r in responses] == [200] * 4, [r.text for r in responses]
    assert health.status_code == 200 and health.json()["control_plane"] is True
    assert len(stack.http.requests) == 4


def test_control_plane_slower_than_the_timeout_is_denied_within_it(stack, token, tmp_path):
    silent = SilentServer()
    timeout_ms = 500
    try:
        with extra_gateway(f"http://127.0.0.1:{silent.port}", tmp_path, allow_loopback_upstreams=True,
                           decide_timeout_ms=timeout_ms) as gw, box_client(gw, token) as box:
            box.get(f"http://127.0.0.1:{procs.free_port()}/warm")  # first flow pays mitmproxy's warm-up
            start = time.monotonic()
            response = box.get(stack.http.url("/"))
            elapsed = time.monotonic() - start
    finally:
        silent.close()
    print(f"\ncontrol plane silent, decide timeout {timeout_ms} ms: denied in {elapsed * 1000:.1f} ms "
          f"(target: timeout + 100 ms = {timeout_ms + 100} ms)")
    assert response.status_code == 503
    assert deny_body(response)["reason"] == "control_plane_unavailable"
    assert elapsed < timeout_ms / 1000 + 1.0  # generous margin on a shared 2-core machine
    assert stack.http.requests == []


def test_health_endpoint_reports_the_control_plane(stack):
    response = httpx.get(stack.gateway.health_url, timeout=5)
    assert response.status_code == 200
    assert response.json() == {"ok": True, "gateway": True, "control_plane": True, "private_upstreams": []}


def test_ca_private_key_stays_private(stack):
    exported = stack.gateway.ca_cert_path.read_text()
    assert "PRIVATE KEY" not in exported and "BEGIN CERTIFICATE" in exported
    assert stack.gateway.confdir.stat().st_mode & 0o077 == 0
    key = stack.gateway.confdir / "mitmproxy-ca.pem"
    assert key.exists() and key.stat().st_mode & 0o077 == 0


def test_a_broken_grant_is_a_policy_error_deny(stack, token):
    from controlplane.policy.models import Grant

    # Written past validation, as a corrupted row would be: the whole decision fails closed.
    Grant.objects.create(slug="broken", host="*", port=stack.http.port, schemes=["http"])
    with box_client(stack.gateway, token) as box:
        response = box.get(stack.http.url("/"))
    assert response.status_code == 503, response.text
    assert deny_body(response)["reason"] == "policy_error"
    assert stack.http.requests == []


def test_allow_intercepted_https_to_an_ip_literal(stack, token):
    grant("tls-ip", stack.https, host="127.0.0.1")
    with box_client(stack.gateway, token) as box:
        response = box.get(stack.https.url("/by-ip"))
    assert response.status_code == 200, response.text
    assert [r["path"] for r in stack.https.requests] == ["/by-ip"]
