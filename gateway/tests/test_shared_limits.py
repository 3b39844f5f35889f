"""The settings the gateway shares with the control plane (roster_gateway.shared_limits): both sides'
defaults agree (the contract fixture both test), and a gateway whose options disagree with the control
plane's health answer says so on /healthz (503) and refuses every request until they agree."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from mitmproxy.test import taddons
from roster_gateway.addon import Gateway
from roster_gateway.options import OPTIONS
from roster_gateway.shared_limits import SHARED, SharedLimits, disagreements

from tests.conftest import CP_URL, HEALTH, FakeControlPlane, answer, make_flow, run_request, settle
from tests.support_ports import free_port

DEFAULTS = {name: default for name, _type, default, _help in OPTIONS}


def _config(tmp_path, **opts):
    token = tmp_path / "tok"
    token.write_text("svc-token")
    token.chmod(0o600)
    addon = Gateway(transport=FakeControlPlane())
    with taddons.context(addon) as tctx:
        tctx.configure(addon, roster_control_plane=CP_URL, roster_service_token_file=str(token), **opts)
        return addon.config


def _limits(**over) -> dict:
    """The contract's limits, but as the `gw` fixture's control plane has them (no budget wait)."""
    return {**HEALTH["limits"], "budget_wait_ms": 0, **over}


def test_every_shared_setting_is_an_option_and_a_limit_of_the_fixture():
    assert {s.option for s in SHARED} <= set(DEFAULTS)
    assert {s.key for s in SHARED} == set(HEALTH["limits"])


def test_the_defaults_agree_with_the_control_planes(tmp_path):
    """The control plane's tests answer exactly this fixture at its defaults; the gateway's defaults
    agree with it, so neither side's default can drift alone."""
    assert disagreements(_config(tmp_path), HEALTH["limits"]) == ()


@pytest.mark.parametrize("option, value, key, theirs, words", [
    ("roster_outcome_batch_max", 300, "outcome_batch_max", 256,
     "roster_outcome_batch_max is 300: it must be at most the control plane's "
     "ROSTER_OUTCOME_BATCH_MAX (256)"),
    ("roster_approval_poll_seconds", 45, "approval_wait_max_seconds", 30,
     "must be at most the control plane's ROSTER_APPROVAL_WAIT_MAX_SECONDS (30)"),
    ("roster_hold_seconds", 20, "approval_hold_seconds", 60,
     "roster_hold_seconds is 20: it must be at least the control plane's ROSTER_APPROVAL_HOLD_SECONDS (60)"),
    ("roster_body_preview_bytes", 8192, "body_preview_bytes", 4096, "ROSTER_BODY_PREVIEW_BYTES (4096)"),
    ("roster_max_target_bytes", 20000, "decide_max_path_bytes", 16384, "ROSTER_DECIDE_MAX_PATH_BYTES"),
    ("roster_max_headers", 300, "decide_max_headers", 200, "ROSTER_DECIDE_MAX_HEADERS (200)"),
    ("roster_max_header_bytes", 32768, "decide_max_header_bytes", 16384, "ROSTER_DECIDE_MAX_HEADER_BYTES"),
    ("roster_proposals_host", "intake.roster.invalid", "proposals_host", "proposals.roster.invalid",
     "roster_proposals_host is 'intake.roster.invalid': it must be the same as the control plane's "
     "ROSTER_PROPOSALS_HOST ('proposals.roster.invalid')"),
])
def test_each_disagreement_is_named(tmp_path, option, value, key, theirs, words):
    config = _config(tmp_path, **{option: value})
    [found] = disagreements(config, _limits(**{key: theirs}))
    assert words in found
    assert disagreements(_config(tmp_path), _limits(**{key: theirs})) == ()


def test_the_safe_side_of_each_rule_agrees(tmp_path):
    config = _config(tmp_path, roster_outcome_batch_max=10, roster_hold_seconds=600, roster_max_headers=5)
    assert disagreements(config, HEALTH["limits"]) == ()


@pytest.mark.parametrize("limits", [None, [], "256", {}])
def test_no_limits_in_the_answer_is_a_disagreement(tmp_path, limits):
    assert disagreements(_config(tmp_path), limits)


@pytest.mark.parametrize("key, value", [("outcome_batch_max", True), ("outcome_batch_max", "256"),
                                        ("proposals_host", None), ("approval_hold_seconds", 60.0)])
def test_a_missing_or_mistyped_limit_is_a_disagreement(tmp_path, key, value):
    limits = _limits(**{key: value})
    if value is None:
        del limits[key]
    [found] = disagreements(_config(tmp_path), limits)
    assert "does not say its" in found and f"limits.{key}" in found


def test_an_unanswered_probe_changes_nothing(tmp_path):
    shared = SharedLimits(_config(tmp_path))
    shared.note(False, None)
    assert not shared.checked and shared.refusal() is None
    shared.note(True, _limits(outcome_batch_max=10))
    assert shared.checked and shared.refusal()
    shared.note(False, None)  # the control plane going away teaches nothing about its settings
    assert shared.refusal()
    shared.note(True, HEALTH["limits"])
    assert shared.problems == () and shared.refusal() is None


async def test_a_disagreeing_gateway_refuses_every_request_and_says_why_once(gw, cp, caplog):
    """The gw fixture holds at most 2 s; a control plane whose hold is 60 s disagrees."""
    caplog.set_level(logging.ERROR, "roster_gateway")
    await gw.running()
    await settle(gw)
    assert gw.shared.problems and "roster_hold_seconds is 2" in gw.shared.problems[0]
    flow = await run_request(gw, make_flow())
    assert flow.response.status_code == 503 and answer(flow)["reason"] == "policy_error"
    assert "disagree with the control plane" in answer(flow)["message"]
    assert "/decide" not in " ".join(cp.paths())  # refused before any decision was asked
    await gw._probe(1)
    assert len([r for r in caplog.records if "disagree" in r.getMessage()]) == 1


async def test_agreeing_again_lets_requests_through(gw, cp):
    cp.health = (200, {"ok": True, "limits": _limits(approval_hold_seconds=2)})
    await gw.running()
    await settle(gw)
    assert gw.shared.problems == ()
    flow = await run_request(gw, make_flow())
    assert flow.response is None  # judged and allowed: left for mitmproxy to forward
    cp.health = (200, {"ok": True, "limits": _limits(approval_hold_seconds=30)})
    assert await gw._probe(1) is True and gw.shared.problems
    assert (await run_request(gw, make_flow())).response.status_code == 503


async def test_the_start_check_waits_for_the_control_plane(gw, cp):
    cp.health = (503, {"ok": False})
    await gw.running()
    await asyncio.sleep(0.05)
    assert not gw.shared.checked  # still asking
    cp.health = (200, {"ok": True, "limits": _limits(approval_hold_seconds=2)})
    await asyncio.wait_for(settle(gw), 5)
    assert gw.shared.problems == ()


async def test_shutting_down_ends_the_start_check_while_the_control_plane_is_away(gw, cp):
    cp.health = (503, {"ok": False})
    await gw.running()
    await asyncio.sleep(0.05)
    await asyncio.wait_for(gw.shutdown(), 5)  # does not wait for a control plane that never answers
    assert not gw.shared.checked


async def _healthz(port: int) -> tuple[int, dict]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


async def test_healthz_names_each_disagreement(cp, token_file):
    addon = Gateway(transport=cp)
    port = free_port()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, roster_control_plane=CP_URL, roster_service_token_file=str(token_file),
                       roster_health_port=port, roster_health_cache_ms=0, roster_outcome_batch_max=512)
        await addon.running()
        try:
            status, body = await _healthz(port)
            assert status == 503 and body["ok"] is False and body["control_plane"] is True
            assert body["disagreements"] == [
                "roster_outcome_batch_max is 512: it must be at most the control plane's "
                "ROSTER_OUTCOME_BATCH_MAX (256)"]
            tctx.configure(addon, roster_outcome_batch_max=256)  # the operator aligns them
            await settle(addon)
            status, body = await _healthz(port)
            assert status == 200 and body["ok"] is True and "disagreements" not in body
        finally:
            await addon.shutdown()
