"""Shared fixtures. Area-specific fixtures live in each tests/<area>/conftest.py."""

from __future__ import annotations

import copy
import hashlib
import os
import secrets

import pytest
from django.conf import settings as django_settings

from tests.support import procs

# Tests never reach a Redis they did not start: a `make up` stack on this machine listens on the default
# address, and a test's Celery task or approval announcement must not land in that stack's queue or live
# pages. Nothing listens on this port; a test that needs Redis starts its own (the redis_url fixture).
UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"
django_settings.REDIS_URL = UNREACHABLE_REDIS
django_settings.CELERY_BROKER_URL = UNREACHABLE_REDIS
django_settings.CHANNEL_LAYERS = copy.deepcopy(django_settings.CHANNEL_LAYERS)
django_settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]["address"] = UNREACHABLE_REDIS

# A suite rerun on PostgreSQL (tests/integration/test_on_postgresql.py) names the database it must reach,
# so a DATABASE_URL that did not take cannot pass for a PostgreSQL run on SQLite.
_EXPECTED_VENDOR = os.environ.get("ROSTER_EXPECT_DB_VENDOR")
if _EXPECTED_VENDOR and not django_settings.DATABASES["default"]["ENGINE"].endswith(_EXPECTED_VENDOR):
    raise pytest.UsageError(f"ROSTER_EXPECT_DB_VENDOR={_EXPECTED_VENDOR} but the tests' database engine is "
                            f"{django_settings.DATABASES['default']['ENGINE']}")

GATEWAY_SERVICE_TOKEN = "gst_test_" + secrets.token_urlsafe(24)


@pytest.fixture(autouse=True)
def _gateway_service_token(settings, tmp_path):
    settings.ROSTER_GATEWAY_TOKEN_SHA256 = hashlib.sha256(GATEWAY_SERVICE_TOKEN.encode()).hexdigest()
    # Never the checkout's var/gateway-token.sha256 (a `make up` stack's): tests decide what is configured.
    settings.ROSTER_GATEWAY_TOKEN_SHA256_FILE = tmp_path / "no-gateway-token.sha256"
    settings.ROSTER_METRICS_TOKEN_SHA256 = ""
    settings.ROSTER_METRICS_TOKEN_SHA256_FILE = tmp_path / "no-metrics-token.sha256"
    # Never the checkout's var/ checkpoint key and log either.
    settings.ROSTER_AUDIT_CHECKPOINT_KEY_FILE = tmp_path / "checkpoint" / "audit-checkpoint.key"
    settings.ROSTER_AUDIT_CHECKPOINT_LOG = tmp_path / "checkpoint" / "audit-checkpoints.jsonl"
    # Each test's own knowledge repositories, never the checkout's var/knowledge.
    settings.ROSTER_KNOWLEDGE_DIR = tmp_path / "knowledge"


@pytest.fixture
def gateway_auth() -> dict[str, str]:
    """Headers the gateway sends to the control plane."""
    return {"Authorization": f"Bearer {GATEWAY_SERVICE_TOKEN}"}


@pytest.fixture
def worker(db):
    """The worker most tests need; a test that needs a second or a differently made one makes its own."""
    from controlplane.fleet.services import worker_create

    return worker_create("alpha")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> str:
    with procs.redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url
