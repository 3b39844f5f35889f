# ruff: noqa: E501 - long cases read best on one line
"""A preset made concrete for one run (controlplane.agents.rendering): pure, every placeholder filled."""

from __future__ import annotations

import pytest

from controlplane.agents.rendering import box_tag, plan_for, preset_image
from controlplane.agents.spec import validate_preset
from controlplane.core.errors import RosterError
from tests.presets.conftest import preset_data


def spec(**overrides):
    return validate_preset(preset_data(**overrides), slug=overrides.get("slug", "pi"), custom=True)


@pytest.mark.parametrize(("image", "tag"), [
    ("roster-box:latest", "latest"), ("roster-box", "latest"), ("roster-box:hkits", "hkits"),
    ("registry.local:5000/roster-box", "latest"), ("registry.local:5000/roster-box:v2", "v2"),
    ("roster-box:v2@sha256:" + "a" * 64, "v2"),
])
def test_box_tag(image, tag):
    assert box_tag(image) == tag


def test_the_plan_fills_every_placeholder():
    plan = plan_for(spec(), model="", base_url="http://127.0.0.1:9999/v1/", prompt="Do it.",
                    box_image="roster-box:hpresets")
    assert plan.image == "roster-box-pi:hpresets"
    assert plan.command == ("pi", "-p", "--model", "gpt-4o-mini", "Do it.")
    assert plan.env == {"PI_OFFLINE": "1", "PI_BASE": "http://127.0.0.1:9999/v1"}
    assert plan.files[0].content == '{"providers": {"roster": {"baseUrl": "http://127.0.0.1:9999/v1", "apiKey": "{env:X}"}}}'
    assert plan.manifest() == {"preset": "pi", "stdin": "none", "files": [{"path": ".pi/agent/models.json", "mode": "copy"}]}


def test_a_prompt_is_one_argument_whatever_it_holds():
    prompt = "a; rm -rf / $(x) `y` {model} {{z}}\nline two"
    plan = plan_for(spec(), model="m", base_url="", prompt=prompt, box_image="roster-box:latest")
    assert plan.command[-1] == prompt  # the prompt's own braces are never filled


def test_the_worker_wins_over_the_preset():
    plan = plan_for(spec(), model="gpt-5", base_url="", prompt="p", box_image="roster-box:latest",
                    worker_image="registry.example/pi:9", worker_env={"PI_OFFLINE": "0", "TZ": "UTC"})
    assert plan.image == "registry.example/pi:9" and plan.model == "gpt-5"
    assert plan.env == {"PI_OFFLINE": "0", "PI_BASE": "https://api.openai.com/v1", "TZ": "UTC"}


def test_empty_defaults_are_the_control_planes(settings):
    settings.ROSTER_AGENT_MODEL, settings.ROSTER_AGENT_BASE_URL = "local-model", "http://10.0.0.5:8000/v1"
    plan = plan_for(spec(default_model="", default_base_url=""), model="", base_url="", prompt="p",
                    box_image="roster-box:latest")
    assert (plan.model, plan.base_url) == ("local-model", "http://10.0.0.5:8000/v1")


def test_a_prompt_too_long_for_an_argument_is_refused(settings):
    settings.ROSTER_PRESET_PROMPT_ARG_MAX_BYTES = 10
    with pytest.raises(RosterError, match="prompt_file"):
        plan_for(spec(), model="", base_url="", prompt="x" * 11, box_image="roster-box:latest")
    # A preset that reads the file instead takes any length.
    long_ok = plan_for(spec(command=["agent", "--task-file", "{prompt_file}"]), model="", base_url="",
                       prompt="x" * 11, box_image="roster-box:latest")
    assert long_ok.command == ("agent", "--task-file", "/config/prompt.md")


def test_custom_layers_are_named_by_their_packages():
    one = spec(slug="mine", image="", build="", npm_packages=["left-pad@1.3.0"])
    two = spec(slug="mine", image="", build="", npm_packages=["left-pad@1.3.1"])
    assert preset_image(one, "roster-box:ci").startswith("roster-box-custom-mine:ci-")
    assert preset_image(one, "roster-box:ci") != preset_image(two, "roster-box:ci")
    assert preset_image(spec(image="", build=""), "roster-box:ci") == "roster-box:ci"
