# ruff: noqa: E501, S108 - long cases read best on one line; /tmp paths are values under test
"""Writing presets and workers' agents: validated, checked against the vault, audited (agent_change)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tomli_w
from django.conf import settings as django_settings

from controlplane.agents import selectors, services
from controlplane.agents.models import Preset, WorkerAgent
from controlplane.agents.presetfiles import PresetFilesInvalid
from controlplane.agents.spec import validate_preset
from controlplane.audit.models import AuditRecord
from controlplane.core.errors import RosterError, ValidationFailed
from controlplane.vault.services import secret_set
from tests.presets.conftest import preset_data

REFERENCE_DIR = Path(django_settings.BASE_DIR) / "workers" / "presets" / "reference"


def _records(**filters):
    return [json.loads(r.body)["data"] for r in AuditRecord.objects.filter(kind="agent_change", **filters)]


@pytest.fixture
def presets_dir(tmp_path, settings):
    """A presets directory of our own: the reference preset and a pi-like one, "kit"."""
    root = tmp_path / "presets"
    shutil.copytree(REFERENCE_DIR, root / "reference")
    (root / "kit").mkdir()
    (root / "kit" / "preset.toml").write_text(tomli_w.dumps(preset_data(slug="kit", build="true")))
    (root / "shared-helpers").mkdir()  # no preset.toml: not a preset
    settings.ROSTER_PRESETS_DIR = root
    return root


def test_migrate_loaded_the_repository_built_ins(db):
    reference = Preset.objects.get(slug="reference")
    assert reference.kind == Preset.Kind.BUILTIN and reference.source == "workers/presets/reference/preset.toml"
    assert reference.command[:3] == ["python3", "-m", "workers.agent"]


def test_sync_loads_updates_and_records_changes(db, presets_dir):
    Preset.objects.exclude(slug="reference").delete()  # the repository's other built-ins
    summary = services.presets_sync_builtin(by="cli")
    assert summary["created"] == ["kit"] and summary["unchanged"] == ["reference"]
    assert _records() == []  # a built-in arriving with the code is git's to record
    (presets_dir / "kit" / "preset.toml").write_text(
        tomli_w.dumps(preset_data(slug="kit", build="true", title="kit 0.74")))
    assert services.presets_sync_builtin(by="cli")["updated"] == ["kit"]
    (change,) = _records()
    assert change["object"] == "preset" and change["name"] == "kit" and change["changed"] == ["title"]
    assert change["before"]["title"] == "pi coding agent" and change["after"]["title"] == "kit 0.74"
    assert services.presets_sync_builtin(by="cli")["unchanged"] == ["kit", "reference"]


def test_one_bad_file_loads_nothing(db, presets_dir):
    (presets_dir / "kit" / "preset.toml").write_text(
        tomli_w.dumps(preset_data(slug="kit", build="true", wire="grpc")))
    (presets_dir / "broken").mkdir()
    (presets_dir / "broken" / "preset.toml").write_text("slug = ")
    before = list(Preset.objects.values_list("slug", "updated_at"))
    with pytest.raises(PresetFilesInvalid) as caught:
        services.presets_sync_builtin()
    text = str(caught.value)
    assert "kit/preset.toml: wire: unknown wire format 'grpc'" in text and "broken/preset.toml: toml" in text
    assert list(Preset.objects.values_list("slug", "updated_at")) == before  # nothing changed


def test_a_build_script_that_does_not_exist_is_named(db, presets_dir):
    (presets_dir / "kit" / "preset.toml").write_text(
        tomli_w.dumps(preset_data(slug="kit", build="workers/presets/kit/nope.sh")))
    with pytest.raises(PresetFilesInvalid, match="nope.sh does not exist"):
        services.presets_sync_builtin()


def test_a_built_in_whose_file_is_gone(db, presets_dir, worker):
    services.presets_sync_builtin()
    services.worker_agent_set(worker, Preset.objects.get(slug="kit"))
    shutil.rmtree(presets_dir / "kit")
    assert services.presets_sync_builtin()["orphaned"] == ["kit"]  # a worker uses it: kept, reported
    services.worker_agent_clear(worker)
    assert services.presets_sync_builtin()["deleted"] == ["kit"]
    assert not Preset.objects.filter(slug="kit").exists()


def test_a_custom_preset_is_audited_and_never_takes_a_built_ins_name(db):
    spec = validate_preset(preset_data(slug="mine"), custom=True)
    preset, action = services.preset_save(spec, kind=Preset.Kind.CUSTOM, by="ana", via="admin")
    assert action == "created" and _records()[0]["by"] == "ana"
    assert services.preset_save(spec, kind=Preset.Kind.CUSTOM)[1] == "unchanged" and len(_records()) == 1
    with pytest.raises(ValidationFailed, match="builtin preset already"):
        services.preset_save(validate_preset(preset_data(slug="reference"), custom=True), kind=Preset.Kind.CUSTOM)
    services.preset_delete(preset, by="ana")
    assert _records()[-1]["action"] == "deleted"


def test_a_preset_carrying_a_secrets_value_is_refused(db):
    secret_set("openai-main", "real-key-value-Zq8vP3kL0xW9", "openai")
    for data in (preset_data(slug="leak", env={"X": "prefix-real-key-value-Zq8vP3kL0xW9"}),
                 preset_data(slug="leak", command=["pi", "--key", "real-key-value-Zq8vP3kL0xW9"]),
                 preset_data(slug="leak", files=[{"path": "a", "content": "key: real-key-value-Zq8vP3kL0xW9"}])):
        with pytest.raises(ValidationFailed) as caught:
            services.preset_save(validate_preset(data, custom=True), kind=Preset.Kind.CUSTOM)
        message = str(caught.value)
        assert "secret openai-main" in message and "real-key-value" not in message
    assert not Preset.objects.filter(slug="leak").exists() and _records() == []


def test_worker_agent_settings_are_validated_and_audited(db, worker):
    reference = Preset.objects.get(slug="reference")
    agent, action = services.worker_agent_set(worker, reference, model="gpt-4o", environment={"TZ": "UTC"},
                                              by="ana", via="admin")
    assert action == "created"
    (record,) = _records(worker_name=worker.name)
    assert record["object"] == "worker_agent" and record["after"]["environment"] == {"TZ": "UTC"}
    services.worker_agent_set(worker, reference, model="gpt-4o", image="registry.example/box:2",
                              environment={"TZ": "UTC"}, by="ana")
    assert _records(worker_name=worker.name)[-1]["changed"] == ["image"]
    assert services.worker_agent_set(worker, reference, model="gpt-4o", image="registry.example/box:2",
                                     environment={"TZ": "UTC"})[1] == "unchanged"
    assert len(_records(worker_name=worker.name)) == 2


@pytest.mark.parametrize(("fields", "where", "words"), [
    ({"environment": {"HTTPS_PROXY": "http://evil:3128"}}, "environment.HTTPS_PROXY", "gateway"),
    ({"environment": {"OPENAI_API_KEY": "x"}}, "environment.OPENAI_API_KEY", "sentinel"),
    ({"environment": {"ROSTER_WORKER": "other"}}, "environment.ROSTER_WORKER", "Roster's own"),
    ({"environment": {"SSL_CERT_FILE": "/tmp/ca"}}, "environment.SSL_CERT_FILE", "CA"),
    ({"environment": {"GH": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}}, "environment.GH", "credential"),
    ({"environment": ["TZ=UTC"]}, "environment", "table"),
    ({"image": "Not An Image"}, "image", "Docker image"),
    ({"base_url": "file:///etc"}, "base_url", "http(s) URL"),
    ({"model": "two words"}, "model", "model name"),
])
def test_worker_agent_bad_fields_change_nothing(db, worker, fields, where, words):
    with pytest.raises(ValidationFailed) as caught:
        services.worker_agent_set(worker, Preset.objects.get(slug="reference"), **fields)
    assert words in caught.value.errors[where]
    assert not WorkerAgent.objects.exists() and _records() == []


def test_a_workers_environment_never_holds_a_secret(db, worker):
    secret_set("gh", "ghx-real-9f8e7d6c5b4a", "generic")
    with pytest.raises(ValidationFailed) as caught:
        services.worker_agent_set(worker, Preset.objects.get(slug="reference"),
                                  environment={"NOTES": "token ghx-real-9f8e7d6c5b4a"})
    assert "secret gh" in caught.value.errors["environment.NOTES"]
    assert "ghx-real" not in str(caught.value)


def test_an_unreadable_vault_is_a_refusal_not_a_pass(db, worker, monkeypatch):
    secret_set("gh", "ghx-real-9f8e7d6c5b4a", "generic")
    from controlplane.vault import services as vault

    def broken(_secret):
        raise vault.VaultError("secret 'gh' cannot be decrypted")

    monkeypatch.setattr(vault, "secret_reveal", broken)
    with pytest.raises(ValidationFailed) as caught:
        services.worker_agent_set(worker, Preset.objects.get(slug="reference"), environment={"TZ": "UTC"})
    assert "cannot check against the vault" in caught.value.errors["vault"]


def test_a_worker_without_a_choice_runs_the_reference(db, worker):
    choice = selectors.worker_agent_choice(worker)
    assert choice.preset.slug == "reference" and choice.model == "" and choice.environment == {}
    Preset.objects.filter(slug="reference").delete()
    with pytest.raises(RosterError, match="preset load"):
        selectors.worker_agent_choice(worker)


def test_a_row_edited_around_the_services_is_refused(db, worker):
    Preset.objects.filter(slug="reference").update(env={"HTTPS_PROXY": "http://evil"})
    with pytest.raises(RosterError, match="invalid as stored"):
        selectors.worker_agent_choice(worker)
