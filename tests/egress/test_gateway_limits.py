"""The decision API's health answer carries its side of the settings the gateway shares
(controlplane.egress.limits; docs/settings.md): what the operator set, never a stale copy, and nothing
when the database is down (the gateway learns nothing from a health answer that is not ok)."""

from __future__ import annotations

from unittest import mock

import pytest

from controlplane.egress import routes
from controlplane.egress.limits import approval_hold_seconds, gateway_limits
from tests.contract import contract

pytestmark = pytest.mark.django_db

HEALTH = "/api/gateway/health"


def test_the_defaults_are_the_contract_fixtures():
    assert gateway_limits() == contract.load("health")["response"]["limits"]


def test_the_limits_follow_the_settings(gateway, settings):
    settings.ROSTER_OUTCOME_BATCH_MAX = 64
    settings.ROSTER_APPROVAL_WAIT_MAX_SECONDS = 12.0
    settings.ROSTER_BODY_PREVIEW_BYTES = 1024
    settings.ROSTER_DECIDE_MAX_PATH_BYTES = 2048
    settings.ROSTER_DECIDE_MAX_HEADERS = 50
    settings.ROSTER_DECIDE_MAX_HEADER_BYTES = 4096
    settings.ROSTER_PROPOSALS_HOST = "intake.roster.invalid"
    settings.ROSTER_BUDGET_WAIT_MS = 5000
    limits = gateway.get(HEALTH).json()["limits"]
    assert limits == {"outcome_batch_max": 64, "approval_wait_max_seconds": 12, "approval_hold_seconds": 60,
                      "body_preview_bytes": 1024, "decide_max_path_bytes": 2048, "decide_max_headers": 50,
                      "decide_max_header_bytes": 4096, "budget_wait_ms": 5000,
                      "proposals_host": "intake.roster.invalid"}


def test_the_hold_is_what_every_ask_answer_carries(settings):
    settings.ROSTER_APPROVAL_HOLD_SECONDS, settings.ROSTER_APPROVAL_TTL_SECONDS = 90, 300
    assert approval_hold_seconds() == 90 == gateway_limits()["approval_hold_seconds"]
    settings.ROSTER_APPROVAL_TTL_SECONDS = 45  # an approval never outlives its TTL: nor does a hold
    assert approval_hold_seconds() == 45 == gateway_limits()["approval_hold_seconds"]


def test_the_hold_in_an_ask_answer_is_the_same(gateway, token, make_grant, settings):
    from tests.egress.fixtures import decide_body

    settings.ROSTER_APPROVAL_HOLD_SECONDS = 33
    make_grant(mode="ask")
    held = gateway.decide(decide_body(token))["hold_seconds"]
    assert held == 33 == gateway_limits()["approval_hold_seconds"]


def test_no_limits_when_the_database_does_not_answer(gateway):
    with mock.patch.object(routes.connection, "cursor", side_effect=RuntimeError("down")):
        response = gateway.get(HEALTH)
    assert response.status_code == 503 and response.json()["ok"] is False
    assert response.json().get("limits") is None
