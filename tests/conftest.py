"""Shared fixtures. Area-specific fixtures live in each tests/<area>/conftest.py."""

from __future__ import annotations

import hashlib
import secrets

import pytest

from tests.support import procs

GATEWAY_SERVICE_TOKEN = "gst_test_" + secrets.token_urlsafe(24)


@pytest.fixture(autouse=True)
def _gateway_service_token(settings, tmp_path):
    settings.ROSTER_GATEWAY_TOKEN_SHA256 = hashlib.sha256(GATEWAY_SERVICE_TOKEN.encode()).hexdigest()
    # Never the checkout's var/gateway-token.sha256 (a `make up` stack's): tests decide what is configured.
    settings.ROSTER_GATEWAY_TOKEN_SHA256_FILE = tmp_path / "no-gateway-token.sha256"
    settings.ROSTER_METRICS_TOKEN_SHA256 = ""
    settings.ROSTER_METRICS_TOKEN_SHA256_FILE = tmp_path / "no-metrics-token.sha256"


@pytest.fixture
def gateway_auth() -> dict[str, str]:
    """Headers the gateway sends to the control plane."""
    return {"Authorization": f"Bearer {GATEWAY_SERVICE_TOKEN}"}


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> str:
    with procs.redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url
