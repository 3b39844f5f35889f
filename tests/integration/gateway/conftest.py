"""One real stack for the gateway integration tests: the decision API process (as `make up` runs it)
serving the test database, a real mitmdump with the addon, and local upstreams over HTTP and HTTPS
(test CA)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import socket
import ssl
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from django.db import connections

from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status, worker_create
from controlplane.policy.models import Grant
from controlplane.vault import keyfile
from controlplane.vault import services as vault_services
from tests.conftest import GATEWAY_SERVICE_TOKEN
from tests.integration.gateway.upstreams import TestCA, Upstream
from tests.support import procs
from tests.support.gateway import gateway_process

HOLD_SECONDS = 4  # how long an "ask" is held; approvals in these tests come within a second
METRICS_SCRAPE_TOKEN = "mst_integration-" + hashlib.sha256(str(time.time_ns()).encode()).hexdigest()[:16]
SECRET_VALUE = "real-upstream-key-7f3Kq9LmW2xZ"


@dataclass
class Stack:
    control_plane_url: str
    gateway: object
    http: Upstream
    https: Upstream
    other: Upstream  # a second host that must never see a secret meant for the first
    ca: TestCA
    vault_key: Path
    tmp: Path
    metrics_url: str = ""  # the decision API process's metrics listener (bearer METRICS_SCRAPE_TOKEN)


@pytest.fixture(scope="session")
def gateway_stack(django_db_setup, django_db_blocker, redis_url, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gateway-stack")
    ca = TestCA(tmp)
    vault_key = tmp / "keys" / "vault.key"
    db_name = connections["default"].settings_dict["NAME"]
    env = procs.control_plane_env(db_name, redis_url, {
        "ROSTER_GATEWAY_TOKEN_SHA256": hashlib.sha256(GATEWAY_SERVICE_TOKEN.encode()).hexdigest(),
        "ROSTER_VAULT_KEY_FILE": str(vault_key),
        "ROSTER_VAULT_SENTINEL_CACHE_SECONDS": "0",
        "ROSTER_APPROVAL_HOLD_SECONDS": str(HOLD_SECONDS),
        "ROSTER_APPROVAL_POLL_SECONDS": "0.05",
        "ROSTER_METRICS_TOKEN_SHA256": hashlib.sha256(METRICS_SCRAPE_TOKEN.encode()).hexdigest(),
    })
    metrics_port = procs.free_port()
    upstreams = [Upstream(), Upstream(ca), Upstream()]
    try:
        with procs.decision_api_server(env, tmp, metrics_port=metrics_port) as url, gateway_process(
            url, GATEWAY_SERVICE_TOKEN, tmp, allow_loopback_upstreams=True, hold_seconds=HOLD_SECONDS,
            extra_options={"ssl_verify_upstream_trusted_ca": ca.cert_path, "roster_sentinel_refresh_ms": 0},
        ) as gw:
            procs.wait_for_http(url + "/api/gateway/health", timeout=30)
            yield Stack(url, gw, upstreams[0], upstreams[1], upstreams[2], ca, vault_key, tmp,
                        metrics_url=f"http://127.0.0.1:{metrics_port}/metrics")
    finally:
        for upstream in upstreams:
            upstream.close()


@pytest.fixture
def stack(gateway_stack, transactional_db, settings, redis_url):
    settings.ROSTER_VAULT_KEY_FILE = gateway_stack.vault_key
    # Approval broadcasts from this process go to the test Redis, not a default one.
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": [redis_url]}}}
    keyfile._cache.clear()
    vault_services.invalidate_sentinel_cache()
    for upstream in (gateway_stack.http, gateway_stack.https, gateway_stack.other):
        upstream.requests.clear()
    yield gateway_stack
    keyfile._cache.clear()


@pytest.fixture
def run_token(stack) -> tuple[Run, str]:
    worker = worker_create(f"gw-{time.monotonic_ns() % 10**9}")
    run, raw = run_create(worker)
    run_set_status(run.pk, Run.Status.RUNNING)
    # This process is the run's "box": it dials the gateway over loopback, and a token is accepted only
    # from its box's address.
    Run.objects.filter(pk=run.pk).update(box_address="127.0.0.1")
    run.refresh_from_db()
    return run, raw


@pytest.fixture
def token(run_token) -> str:
    return run_token[1]


@pytest.fixture
def secret(stack):
    return vault_services.secret_set("upstream-key", SECRET_VALUE, kind="generic")


def grant(slug: str, upstream: Upstream, host: str = "127.0.0.1", **fields) -> Grant:
    fields.setdefault("schemes", ["https" if upstream.tls else "http"])
    return Grant.objects.create(slug=slug, host=host, port=upstream.port, **fields)


def box_client(gateway, token: str | None, **kwargs) -> httpx.Client:
    """What a box does: proxy with its run token, trusting the gateway's CA (public part only)."""
    proxy = gateway.proxy_url_with(token) if token is not None else gateway.proxy_url
    kwargs.setdefault("verify", ssl.create_default_context(cafile=str(gateway.ca_cert_path)))
    return httpx.Client(proxy=proxy, timeout=20, trust_env=False, **kwargs)


def deny_body(response: httpx.Response) -> dict:
    assert response.headers.get("content-type") == "application/json", response.text
    body = response.json()
    assert body["verdict"] == "deny"
    return body


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


@contextlib.contextmanager
def extra_gateway(control_plane_url: str, tmp: Path, **kwargs):
    """A second gateway with other options (closed vetting, a dead control plane, ...)."""
    with gateway_process(control_plane_url, GATEWAY_SERVICE_TOKEN, tmp, **kwargs) as gw:
        yield gw


# --- raw proxy requests, for shapes an HTTP client would never send ---
def proxy_auth(token: str) -> str:
    return "Basic " + base64.b64encode(f"run:{token}".encode()).decode()


def read_response(sock) -> tuple[int, bytes]:
    sock.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")[1:]
                   if line.lower().startswith(b"content-length:")), 0)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, rest


def raw_request(gateway, request: bytes) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        sock.sendall(request)
        return read_response(sock)
