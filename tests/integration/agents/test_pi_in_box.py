"""pi (@mariozechner/pi-coding-agent, its own `pi --print` and tool loop) in a real box from its preset,
through the real gateway, against the scripted model speaking OpenAI chat completions."""

from __future__ import annotations

import pytest

from tests.integration.agents.harness import agent_in_box, assert_governed

pytestmark = [pytest.mark.integration, pytest.mark.docker]

REAL_KEY = "sk-proj-" + "P1R3alK3y" * 6


def test_pi_in_a_box_from_its_preset(stack, preset_images, monkeypatch, settings):
    preset_images("pi")
    result = agent_in_box(stack, monkeypatch, settings, "pi", REAL_KEY)
    assert_governed(result)
    # Streamed chat completions, every call.
    assert all(r["api"] == "chat" and r["stream"] for r in result.model.records)
