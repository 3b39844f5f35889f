# ruff: noqa: E501 - long cases read best on one line
"""`manage.py preset …` and the grant a preset suggests (offered; saved only by a human, audited)."""

from __future__ import annotations

import tomllib
from io import StringIO

import pytest
import tomli_w
from django.core.management import CommandError, call_command

from controlplane.agents import selectors, services, suggestions
from controlplane.agents.models import Preset, WorkerAgent
from controlplane.agents.spec import validate_preset
from controlplane.audit.models import AuditRecord
from controlplane.policy.models import Grant
from controlplane.policy.validation import validate_grant
from controlplane.vault.services import secret_set
from tests.presets.conftest import preset_data


def run(*args) -> str:
    out = StringIO()
    call_command("preset", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.fixture
def pi(db):
    spec = validate_preset(preset_data(slug="pi-custom", image="", build=""), custom=True)
    return services.preset_save(spec, kind=Preset.Kind.CUSTOM)[0]


def test_list_and_show(db, pi):
    listing = run("list")
    assert "reference\tbuiltin\topenai-chat\troster-box:" in listing and "pi-custom\tcustom" in listing
    shown = tomllib.loads(run("show", "reference"))
    assert validate_preset(shown, slug="reference").slug == "reference"


def test_check_names_file_and_key(tmp_path, db):
    good = tmp_path / "pi" / "preset.toml"
    good.parent.mkdir()
    good.write_text(tomli_w.dumps(preset_data(image="", build="")))
    assert "1 preset file(s) OK" in run("check", str(good))
    bad = tmp_path / "codex" / "preset.toml"
    bad.parent.mkdir()
    bad.write_text(tomli_w.dumps(preset_data(slug="codex", image="", build="", env={"HTTP_PROXY": "x"})))
    with pytest.raises(CommandError) as caught:
        run("check", str(good), str(bad))
    assert f"{bad}: env.HTTP_PROXY: cannot be set here" in str(caught.value)


def test_use_sets_a_workers_agent(worker, pi):
    assert "preset pi-custom (created)" in run("use", worker.name, "pi-custom", "--model", "gpt-4.1",
                                               "--env", "TZ=UTC")
    agent = WorkerAgent.objects.get(worker=worker)
    assert (agent.model, agent.environment) == ("gpt-4.1", {"TZ": "UTC"})
    with pytest.raises(CommandError, match="HTTPS_PROXY"):
        run("use", worker.name, "pi-custom", "--env", "HTTPS_PROXY=http://evil")
    with pytest.raises(CommandError, match="no preset named 'nope'"):
        run("use", worker.name, "nope")


def test_the_suggested_grant_is_the_presets_paths_on_the_workers_base_url(worker, pi):
    secret_set("openai-main", "real-key-AAAABBBBCCCC", "openai")
    services.worker_agent_set(worker, pi, base_url="http://127.0.0.1:9999/v1")
    text = run("suggest-grants", worker.name, "--secret", "openai-main")
    data = tomllib.loads(text)
    assert data["host"] == "127.0.0.1" and data["port"] == 9999 and data["schemes"] == ["http"]
    assert data["paths"] == ["/v1/chat/completions"] and data["secret"] == "openai-main"
    assert data["inject_format"] == "Bearer {secret}" and data["trace"] is True and data["wire"] == "openai-chat"
    assert validate_grant(data, slug="x").values["worker"] == worker
    assert not Grant.objects.exists()  # offered only
    assert "real-key" not in text
    assert "created" in run("suggest-grants", worker.name, "--secret", "openai-main", "--save")
    grant = Grant.objects.get(slug=f"{worker.name}-pi-custom-model")
    assert grant.wire == "openai-chat" and grant.secret.name == "openai-main"
    assert AuditRecord.objects.filter(kind="grant_change").count() == 1


def test_default_base_urls_without_a_path(worker, db):
    spec = validate_preset(preset_data(slug="claude", image="", build="", wire="anthropic-messages",
                                       default_base_url="https://api.anthropic.com",
                                       suggested_grant={"paths": ["{base_path}/v1/messages"],
                                                        "inject_header": "x-api-key", "inject_format": "{secret}"}),
                           custom=True)
    preset = services.preset_save(spec, kind=Preset.Kind.CUSTOM)[0]
    services.worker_agent_set(worker, preset)
    data = suggestions.suggested_grant_data(worker, selectors.worker_agent_choice(worker), "k")
    assert (data["host"], data["paths"], "port" in data) == ("api.anthropic.com", ["/v1/messages"], False)


def test_suggest_needs_a_stored_secret(worker, db):
    with pytest.raises(CommandError, match="secret set"):
        run("suggest-grants", worker.name, "--secret", "missing")


def test_a_secret_of_another_kind_is_noted(worker, pi):
    secret = secret_set("gh", "ghx-real-0000", "github")
    services.worker_agent_set(worker, pi)
    note = suggestions.kind_note(selectors.worker_agent_choice(worker), secret)
    assert "kind github" in note and "kind openai" in note
