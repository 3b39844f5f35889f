"""Fixtures shared by the decision-API, contract and approval tests (imported by their conftests)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status, worker_create
from controlplane.policy.models import Grant
from controlplane.vault import keyfile
from controlplane.vault import services as vault_services

SECRET_VALUE = "real-openai-key-Zq8vP3kL0xW9mN4tRr"
DECIDE = "/api/gateway/decide"
# The box's address on the locked network: the live run's, and where decide_body's requests come from
# (a run's token is accepted only from its box's address; tests/contract's fixtures use the same one).
BOX_ADDRESS = "10.89.0.2"


@pytest.fixture(autouse=True)
def vault_key(settings, tmp_path):
    settings.ROSTER_VAULT_KEY_FILE = tmp_path / "keys" / "vault.key"
    keyfile._cache.clear()
    vault_services.invalidate_sentinel_cache()
    yield
    keyfile._cache.clear()
    vault_services.invalidate_sentinel_cache()


@pytest.fixture(autouse=True)
def fresh_policy_cache():
    """The grants cache is keyed by the policy version, which a flushed test database starts again at
    1: a cache left by an earlier test would be served under the same number."""
    from controlplane.egress import policy_cache

    policy_cache._state = policy_cache.PolicyState(None)
    yield
    policy_cache._state = policy_cache.PolicyState(None)


@pytest.fixture
def other_worker(db):
    return worker_create("beta")


@pytest.fixture
def live_run(worker):
    run, raw = run_create(worker)
    run_set_status(run.pk, Run.Status.RUNNING)
    Run.objects.filter(pk=run.pk).update(box_address=BOX_ADDRESS)
    run.refresh_from_db()
    return run, raw


@pytest.fixture
def token(live_run):
    return live_run[1]


@pytest.fixture
def secret(db):
    return vault_services.secret_set("openai", SECRET_VALUE, kind="openai")


@pytest.fixture
def make_grant(db):
    def make(slug="openai-chat", **fields):
        fields.setdefault("host", "api.openai.com")
        fields.setdefault("schemes", ["https"])
        return Grant.objects.create(slug=slug, **fields)

    return make


def decide_body(token: str, **overrides) -> dict:
    body = {
        "token": token, "client": BOX_ADDRESS, "method": "POST", "scheme": "https", "host": "api.openai.com",
        "port": 443,
        "path": "/v1/chat/completions", "headers": [["content-type", "application/json"]],
        "body_size": 2, "body_sha256": "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
        "body_preview": "{}", "mcp": [],
    }
    body.update(overrides)
    return body


class Gateway:
    """The gateway as a test client: JSON in, JSON out, with the service credential."""

    def __init__(self, headers: dict[str, str]):
        self.client = Client()
        self.headers = headers

    def post(self, path: str, body: dict | str, headers: dict | None = None):
        data = body if isinstance(body, str) else json.dumps(body)
        return self.client.post(path, data=data, content_type="application/json",
                                headers=self.headers if headers is None else headers)

    def get(self, path: str, headers: dict | None = None):
        return self.client.get(path, headers=self.headers if headers is None else headers)

    def decide(self, body: dict) -> dict:
        response = self.post(DECIDE, body)
        assert response.status_code == 200, response.content
        return response.json()


@pytest.fixture
def gateway(gateway_auth):
    return Gateway(gateway_auth)
