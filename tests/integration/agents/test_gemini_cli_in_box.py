"""Gemini CLI (@google/gemini-cli, its own bundle and tool loop) in a real box from its preset, through the
real gateway, against the scripted model speaking Gemini's streamGenerateContent (SSE): the key only as
the grant's `x-goog-api-key`, every call metered by its usageMetadata."""

from __future__ import annotations

import pytest

from tests.integration.agents.harness import agent_in_box, assert_governed

pytestmark = [pytest.mark.integration, pytest.mark.docker]

REAL_KEY = "AIza" + "G3m1n1R3alK3y" * 3


def test_gemini_cli_in_a_box_from_its_preset(stack, preset_images, monkeypatch, settings):
    # Gemini CLI 0.61 peaks above the default 512 MB once its shell tool has run (killed: out of memory
    # at 512m; README.md beside the preset): its boxes need ROSTER_BOX_MEMORY of 1g.
    settings.ROSTER_BOX_MEMORY = "1g"
    preset_images("gemini-cli")
    result = agent_in_box(stack, monkeypatch, settings, "gemini-cli", REAL_KEY)
    assert_governed(result)
    assert all(r["api"] == "gemini" and r["stream"] and r["sse"] for r in result.model.records)
