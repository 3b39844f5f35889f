"""Deny reasons and their statuses (reasons.py) agree with the contract the control plane keeps:
tests/contract/deny_reasons.json (one definition for both sides) and every deny fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from roster_gateway.reasons import CONTROL_PLANE_STATUS, GATEWAY_STATUS, deny_status
from roster_gateway.wire import WireDecision

CONTRACT = Path(__file__).resolve().parents[2] / "tests" / "contract"
DENY_FIXTURES = sorted(CONTRACT.glob("decide_deny_*.json"))


def _deny(reason: str, status: int) -> WireDecision:
    return WireDecision(verdict="deny", reason=reason, status=status, message="", decision_id="dc_d",
                        grant=None)


def test_the_gateway_table_is_the_shared_definition():
    shared = json.loads((CONTRACT / "deny_reasons.json").read_text())["reasons"]
    assert CONTROL_PLANE_STATUS == shared


@pytest.mark.parametrize("path", DENY_FIXTURES, ids=[p.stem for p in DENY_FIXTURES])
def test_every_deny_fixture_gets_the_status_the_control_plane_sent(path):
    answer = json.loads(path.read_text())["response"]
    assert deny_status(_deny(answer["reason"], answer["status"])) == answer["status"]


CASES = [
    ("a known reason keeps its status even if the answer says otherwise", "no_grant", 200, 403),
    ("bad_token is always 407", "bad_token", 403, 407),
    ("over_budget is 402", "over_budget", 403, 402),
    ("an unknown reason with a deny status keeps it", "brand_new", 402, 402),
    ("an unknown reason with an odd status becomes 403", "brand_new", 200, 403),
    ("an unknown reason never gets a success or redirect", "brand_new", 302, 403),
]


@pytest.mark.parametrize("name,reason,sent,expected", CASES, ids=[c[0] for c in CASES])
def test_deny_status_table(name, reason, sent, expected):
    assert deny_status(_deny(reason, sent)) == expected


def test_no_reason_is_defined_twice_with_different_statuses():
    both = set(CONTROL_PLANE_STATUS) & set(GATEWAY_STATUS)
    assert all(CONTROL_PLANE_STATUS[r] == GATEWAY_STATUS[r] for r in both)
    assert all(400 <= s < 600 for s in {**CONTROL_PLANE_STATUS, **GATEWAY_STATUS}.values())
