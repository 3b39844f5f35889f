"""Claude Code (@anthropic-ai/claude-code, its own native binary and tool loop) in a real box from its
preset, through the real gateway, against the scripted model speaking Anthropic messages. Without the
preset's traffic switches it calls Anthropic's own endpoints (bootstrap, evals, event logging, some with
the key's sentinel): every one is denied, none forwarded."""

from __future__ import annotations

import pytest

from tests.integration.agents.harness import agent_in_box, assert_governed

pytestmark = [pytest.mark.integration, pytest.mark.docker]

REAL_KEY = "sk-ant-api03-" + "C1aud3R3alK3y" * 6
TRAFFIC_SWITCHES = frozenset({
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING",
    "DISABLE_AUTOUPDATER", "DISABLE_BUG_COMMAND", "DISABLE_NON_ESSENTIAL_MODEL_CALLS"})


def test_claude_code_in_a_box_from_its_preset(stack, preset_images, monkeypatch, settings):
    preset_images("claude-code")
    result = agent_in_box(stack, monkeypatch, settings, "claude-code", REAL_KEY)
    assert_governed(result)
    # Streamed messages, every call, each asking the preset's output ceiling (not 32000): a call
    # reserves its worst case, so the ceiling is what a token cap sees per call.
    assert all(r["api"] == "anthropic" and r["stream"] for r in result.model.records)
    assert {body["max_tokens"] for body in result.model.bodies} == {8192}


def test_claude_code_without_its_traffic_switches_calls_home_and_is_denied(stack, preset_images,
                                                                           monkeypatch, settings):
    preset_images("claude-code")
    result = agent_in_box(stack, monkeypatch, settings, "claude-code", REAL_KEY,
                          without_env=TRAFFIC_SWITCHES)
    vendor = [d for d in result.decisions if "api.anthropic.com" in d["url"]]
    assert vendor, "without the switches Claude Code calls its vendor; the preset's switches are what stop it"
    assert all(d["verdict"] == "deny" for d in vendor), vendor
    # The task still completes: the vendor's endpoints are not needed to work.
    assert result.run.status == "succeeded" and result.answer.endswith("refused by policy.")
