"""The settings the gateway shares with the control plane (docs/settings.md), through a real mitmdump and
the real decision API: the stack's gateway agrees and serves; a gateway started with an option the
control plane's settings do not allow says which on /healthz (503: `make up` and the dispatcher's
preflight refuse it), logs it, and refuses every request without asking for a decision or reaching the
upstream."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.gateway.conftest import box_client, extra_gateway, grant, wait_until

pytestmark = pytest.mark.integration


def test_the_stack_gateway_agrees_with_the_control_plane(stack, token):
    health = httpx.get(stack.gateway.health_url, timeout=5)
    assert health.status_code == 200 and health.json()["ok"] is True
    assert "disagreements" not in health.json()
    grant("plain", stack.http)
    with box_client(stack.gateway, token) as box:
        assert box.get(stack.http.url("/agreed")).status_code == 200


@pytest.mark.parametrize("option, value, words", [
    ("roster_outcome_batch_max", 512,
     "roster_outcome_batch_max is 512: it must be at most the control plane's "
     "ROSTER_OUTCOME_BATCH_MAX (256)"),
    ("roster_hold_seconds", 2,
     "roster_hold_seconds is 2: it must be at least the control plane's ROSTER_APPROVAL_HOLD_SECONDS (4)"),
    ("roster_proposals_host", "intake.roster.invalid",
     "it must be the same as the control plane's ROSTER_PROPOSALS_HOST ('proposals.roster.invalid')"),
])
def test_a_gateway_that_disagrees_refuses_every_request(stack, token, option, value, words):
    grant("plain", stack.http)
    options = ({"hold_seconds": value} if option == "roster_hold_seconds"
               else {"extra_options": {option: value}})
    with extra_gateway(stack.control_plane_url, stack.tmp, allow_loopback_upstreams=True, **options) as gw:
        # Checked at start, before anything asked for its health.
        assert wait_until(lambda: "disagree" in gw.log_path.read_text(), timeout=10), gw.log_path.read_text()
        health = httpx.get(gw.health_url, timeout=5)
        assert health.status_code == 503
        assert health.json()["control_plane"] is True and health.json()["ok"] is False
        assert [words in d for d in health.json()["disagreements"]] == [True]
        with box_client(gw, token) as box:
            refused = box.get(stack.http.url("/never"))
        assert refused.status_code == 503 and refused.json()["reason"] == "policy_error"
        assert "disagree with the control plane" in refused.json()["message"]
    assert stack.http.requests == []
