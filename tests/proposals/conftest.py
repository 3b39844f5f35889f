"""Fixtures for proposals: a worker with a live run, destinations of each kind, the gateway's calls."""

from __future__ import annotations

import base64
import json

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from controlplane.core.roles import APPROVERS, ensure_roles
from controlplane.proposals.services import destination_save
from controlplane.proposals.validation import validate_destination
from tests.egress.fixtures import BOX_ADDRESS, live_run, secret, token, vault_key  # noqa: F401 - fixtures

WEBHOOK_SECRET = "whsec-real-Kq93nVb27LmX"
SMTP_PASSWORD = "smtp-real-pass-Ht6Yp0Wq"


@pytest.fixture(autouse=True)
def _eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    from controlplane.celery import app

    app.conf.task_always_eager = True
    settings.ROSTER_EXECUTOR_RETRY_SECONDS = 0
    settings.ROSTER_EXECUTOR_TIMEOUT_SECONDS = 3
    # Queue pages are told through the channel layer; here nobody listens, so no Redis is needed.
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def make_destination(db):
    def make(name: str, **data):
        return destination_save(validate_destination(data, name=name), actor="test")[0]

    return make


@pytest.fixture
def approver(db):
    ensure_roles()
    user = User.objects.create_user("ann", password="pw-ann-123456")
    user.groups.add(Group.objects.get(name=APPROVERS))
    return User.objects.get(pk=user.pk)


class GatewayCalls:
    """The control-plane calls the gateway makes for the reserved name."""

    def __init__(self, auth: dict):
        self.client = Client()
        self.auth = auth

    def propose(self, run_token: str, body) -> tuple[int, dict]:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        response = self.client.post(
            "/api/gateway/proposals",
            data=json.dumps({"token": run_token, "client": BOX_ADDRESS,
                             "body_b64": base64.b64encode(raw).decode()}),
            content_type="application/json",
            headers=self.auth,
        )
        assert response.status_code == 200, response.content
        answer = response.json()
        return answer["status"], answer["body"]

    def status(self, run_token: str, proposal_id: str, client: str = BOX_ADDRESS) -> tuple[int, dict]:
        response = self.client.post(
            f"/api/gateway/proposals/{proposal_id}/status",
            data=json.dumps({"token": run_token, "client": client}),
            content_type="application/json",
            headers=self.auth,
        )
        assert response.status_code == 200, response.content
        answer = response.json()
        return answer["status"], answer["body"]


@pytest.fixture
def gw(gateway_auth) -> GatewayCalls:
    return GatewayCalls({"Authorization": gateway_auth["Authorization"]})
