"""Codex (@openai/codex, its own native binary and tool loop) in a real box from its preset, through the
real gateway, against the scripted model speaking OpenAI Responses over HTTP: its WebSocket is off, so
no call tries an upgrade, and every call is a metered streamed Responses call."""

from __future__ import annotations

import pytest

from tests.integration.agents.harness import agent_in_box, assert_governed

pytestmark = [pytest.mark.integration, pytest.mark.docker]

REAL_KEY = "sk-proj-" + "C0d3xR3alK3y" * 5


def test_codex_in_a_box_from_its_preset(stack, preset_images, monkeypatch, settings):
    preset_images("codex")
    result = agent_in_box(stack, monkeypatch, settings, "codex", REAL_KEY)
    assert_governed(result)
    assert all(r["api"] == "responses" and r["stream"] for r in result.model.records)
    # Only Responses calls over HTTP: not one WebSocket upgrade was asked for (the gateway would refuse it).
    assert all(d["method"] == "POST" for d in result.decisions if result.model_host in d["url"])
