"""The control plane's deny reasons and their HTTP statuses are exactly the shared table
tests/contract/deny_reasons.json, which the gateway's tests read too: a reason added, dropped or
re-numbered on one side fails here until both agree."""

from __future__ import annotations

import json

from controlplane.egress.schemas import DecideOut
from controlplane.egress.wire import DENY_STATUS
from controlplane.policy.engine import DenyReason
from tests.contract import contract

SHARED = json.loads((contract.HERE / "deny_reasons.json").read_text())["reasons"]


def test_every_deny_reason_has_a_status():
    assert set(DENY_STATUS) == set(DenyReason)


def test_the_control_plane_table_is_the_shared_one():
    assert {str(reason): status for reason, status in DENY_STATUS.items()} == SHARED


def test_the_wire_schema_admits_exactly_these_reasons():
    annotation = DecideOut.model_fields["reason"].annotation
    literal = next(arg for arg in annotation.__args__ if arg is not type(None))
    assert set(literal.__args__) == set(SHARED)


def test_deny_statuses_are_client_or_server_errors():
    assert all(400 <= status <= 599 for status in SHARED.values())
