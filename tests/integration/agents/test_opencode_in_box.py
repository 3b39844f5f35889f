"""OpenCode (opencode-ai, its own native binary and tool loop) in a real box from its preset, through the
real gateway, against the scripted model speaking OpenAI chat completions."""

from __future__ import annotations

import pytest

from tests.integration.agents.harness import agent_in_box, assert_governed

pytestmark = [pytest.mark.integration, pytest.mark.docker]

REAL_KEY = "sk-proj-" + "0p3nC0d3R3alK3y" * 4


def test_opencode_in_a_box_from_its_preset(stack, preset_images, monkeypatch, settings):
    preset_images("opencode")
    result = agent_in_box(stack, monkeypatch, settings, "opencode", REAL_KEY)
    assert_governed(result)
    assert all(r["api"] == "chat" and r["stream"] for r in result.model.records)
    # Every call asks the preset's output ceiling (not 32000): a call reserves its worst case.
    assert {body["max_tokens"] for body in result.model.bodies} == {8192}
