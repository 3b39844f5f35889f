"""The control plane's metrics listener answers only its scrape token, on its own port: never without a
token, never to the gateway's service token, never with no hash configured, and never on the web server's
or the decision API's listener."""

from __future__ import annotations

import asyncio
import hashlib
import urllib.error
import urllib.request
from wsgiref.util import setup_testing_defaults

import pytest
from django.test import Client
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from controlplane.core.service_token import metrics_token_sha256
from controlplane.egress.asgi import gateway_only
from controlplane.metrics import listener
from tests.conftest import GATEWAY_SERVICE_TOKEN

SCRAPE_TOKEN = "mst_test-scrape-token"  # noqa: S105 - a test credential
SCRAPE_HASH = hashlib.sha256(SCRAPE_TOKEN.encode()).hexdigest()


def call(app, path="/metrics", method="GET", authorization: str | None = None) -> tuple[str, dict, bytes]:
    environ: dict = {"PATH_INFO": path, "REQUEST_METHOD": method}
    if authorization is not None:
        environ["HTTP_AUTHORIZATION"] = authorization
    setup_testing_defaults(environ)
    seen: dict = {}

    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(app(environ, start_response))
    return seen["status"], seen["headers"], body


@pytest.fixture
def app(transactional_db):
    # The listener closes its thread's stale database connection around a scrape, as in production:
    # that needs database access, outside a test transaction (which it would take for a broken one).
    registry = CollectorRegistry()
    Counter("roster_test_things", "things", registry=registry).inc(3)
    return listener.metrics_app(registry, expected_hash=lambda: SCRAPE_HASH)


def test_the_scrape_token_gets_the_exposition(app):
    status, headers, body = call(app, authorization=f"Bearer {SCRAPE_TOKEN}")
    assert status.startswith("200") and headers["Content-Type"].startswith("text/plain")
    [family] = [f for f in text_string_to_metric_families(body.decode()) if f.name == "roster_test_things"]
    assert family.samples[0].value == 3


@pytest.mark.parametrize("authorization", [
    None, "", "Bearer ", "Bearer wrong-token", f"Basic {SCRAPE_TOKEN}", f"Bearer {SCRAPE_TOKEN}x",
    f"Bearer {GATEWAY_SERVICE_TOKEN}",  # the gateway's credential is not a scrape credential
], ids=["none", "empty", "bearer-nothing", "wrong", "basic", "longer", "gateway-token"])  # (random tokens)
def test_anything_else_is_refused_and_shows_nothing(app, authorization):
    status, headers, body = call(app, authorization=authorization)
    assert status.startswith("401") and headers["WWW-Authenticate"].startswith("Bearer")
    assert b"roster_test_things" not in body


@pytest.mark.parametrize(("path", "method"), [("/", "GET"), ("/metrics/x", "GET"), ("/metrics", "POST")])
def test_only_get_metrics_is_served(app, path, method):
    status, _, body = call(app, path=path, method=method, authorization=f"Bearer {SCRAPE_TOKEN}")
    assert status.startswith("404") and b"roster_test_things" not in body


def test_with_no_hash_configured_every_scrape_is_refused(settings):
    registry = CollectorRegistry()
    app = listener.metrics_app(registry)  # the configured hash: none (tests/conftest.py)
    assert metrics_token_sha256() == ""
    status, _, _ = call(app, authorization="Bearer ")
    assert status.startswith("401")
    status, _, _ = call(app, authorization=f"Bearer {SCRAPE_TOKEN}")
    assert status.startswith("401")


def test_the_hash_file_is_read_and_a_bad_one_is_no_hash(settings, tmp_path):
    path = tmp_path / "metrics-token.sha256"
    settings.ROSTER_METRICS_TOKEN_SHA256_FILE = path
    path.write_text(SCRAPE_HASH + "\n")
    assert metrics_token_sha256() == SCRAPE_HASH
    path.write_text("not a hash at all, longer than before\n")
    assert metrics_token_sha256() == ""


@pytest.mark.django_db(transaction=True)
def test_the_listener_serves_the_state_on_a_port_of_its_own(settings, redis_url):
    settings.ROSTER_METRICS_TOKEN_SHA256 = SCRAPE_HASH
    settings.CELERY_BROKER_URL = redis_url
    registry = CollectorRegistry()
    server = listener.start("127.0.0.1", 0, registry=registry)
    url = f"http://127.0.0.1:{server.server_port}/metrics"
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10)  # noqa: S310 - a loopback http URL built above
        assert refused.value.code == 401
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - as above
            text = response.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"roster_approvals_pending", "roster_runs", "roster_metrics_source_up"} <= names
    assert 'roster_metrics_source_up{source="database"} 1.0' in text


@pytest.mark.django_db
@pytest.mark.parametrize("authorization", [None, f"Bearer {SCRAPE_TOKEN}"])
def test_the_web_server_never_serves_metrics(settings, authorization):
    settings.ROSTER_METRICS_TOKEN_SHA256 = SCRAPE_HASH
    headers = {"Authorization": authorization} if authorization else {}
    response = Client().get("/metrics", headers=headers)
    assert response.status_code == 404
    assert b"roster_" not in response.content


def test_the_decision_api_listener_never_serves_metrics():
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": "/metrics", "method": "GET", "headers": []}
    asyncio.run(gateway_only()(scope, receive, send))
    assert sent[0]["status"] == 404
    assert b"roster_" not in b"".join(m.get("body", b"") for m in sent[1:])
