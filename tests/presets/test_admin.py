# ruff: noqa: E501 - long cases read best on one line
"""Presets and workers' agents in the admin: built-ins read-only, custom presets as validated TOML, a
worker's agent (and its admin-only image and environment) through the audited services."""

from __future__ import annotations

import tomli_w
from django.contrib.auth.models import Group, Permission, User

from controlplane.agents.models import Preset, WorkerAgent
from controlplane.audit.models import AuditRecord
from controlplane.core.roles import ADMINS
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set
from tests.presets.conftest import preset_data


def _login(client, **flags) -> User:
    user = User.objects.create(username=flags.pop("username", "root"), is_staff=True, **flags)
    client.force_login(user)
    return user


def _worker_agent_form(worker, preset, **fields) -> dict:
    return {"worker": str(worker.pk), "preset": str(preset.pk), "model": "", "base_url": "", "image": "",
            "environment": "", "save_suggested_grant_with": "", **fields}


def test_a_built_in_is_shown_read_only(client, db):
    _login(client, is_superuser=True)
    reference = Preset.objects.get(slug="reference")
    page = client.get(f"/admin/agents/preset/{reference.pk}/change/").content.decode()
    assert "workers.agent" in page and "workers/presets/reference/preset.toml" in page
    assert 'name="definition"' not in page  # nothing to edit
    resp = client.post(f"/admin/agents/preset/{reference.pk}/change/", {"definition": "slug = 'x'"})
    assert resp.status_code == 403
    assert client.post(f"/admin/agents/preset/{reference.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Preset.objects.filter(slug="reference").exists()


def test_a_custom_preset_is_validated_toml_and_audited(client, db):
    _login(client, is_superuser=True)
    bad = tomli_w.dumps(preset_data(slug="mine", image="", build="", env={"HTTPS_PROXY": "http://evil"}))
    page = client.post("/admin/agents/preset/add/", {"definition": bad}).content.decode()
    assert "env.HTTPS_PROXY: cannot be set here" in page and not Preset.objects.filter(slug="mine").exists()
    assert "not valid TOML" in client.post("/admin/agents/preset/add/", {"definition": "slug = "}).content.decode()
    good = tomli_w.dumps(preset_data(slug="mine", image="", build="", npm_packages=["left-pad@1.3.0"]))
    assert client.post("/admin/agents/preset/add/", {"definition": good}).status_code == 302
    preset = Preset.objects.get(slug="mine")
    assert preset.kind == Preset.Kind.CUSTOM and preset.npm_packages == ["left-pad@1.3.0"]
    assert AuditRecord.objects.filter(kind="agent_change").count() == 1


def test_a_workers_agent_is_set_validated_and_its_grant_saved_on_request(client, worker):
    _login(client, is_superuser=True)
    secret = secret_set("openai-main", "real-value-123456789", "openai")
    reference = Preset.objects.get(slug="reference")
    page = client.post("/admin/agents/workeragent/add/", _worker_agent_form(
        worker, reference, environment="TZ=UTC\nHTTPS_PROXY=http://evil:3128")).content.decode()
    assert "only exit is the gateway" in page and not WorkerAgent.objects.exists()
    page = client.post("/admin/agents/workeragent/add/", _worker_agent_form(
        worker, reference, environment="NOTE=real-value-123456789")).content.decode()
    assert "secret openai-main" in page and not WorkerAgent.objects.exists()
    resp = client.post("/admin/agents/workeragent/add/", _worker_agent_form(
        worker, reference, model="gpt-4.1", base_url="http://127.0.0.1:9999/v1", environment="TZ=UTC",
        save_suggested_grant_with=str(secret.pk)))
    assert resp.status_code == 302
    agent = WorkerAgent.objects.get(worker=worker)
    assert (agent.model, agent.environment) == ("gpt-4.1", {"TZ": "UTC"})
    grant = Grant.objects.get(worker=worker)
    assert (grant.host, grant.port, grant.paths, grant.secret_id) == ("127.0.0.1", 9999, ["/v1/chat/completions"], secret.pk)
    assert AuditRecord.objects.filter(kind="agent_change", worker_name=worker.name).count() == 1
    assert AuditRecord.objects.filter(kind="grant_change").count() == 1
    page = client.get(f"/admin/agents/workeragent/{agent.pk}/change/").content.decode()
    assert "Suggested grant" in page and "/v1/chat/completions" in page and "real-value" not in page


def test_only_admins_set_a_workers_box(client, worker):
    staff = _login(client, username="staff")
    # Every permission of the app, but not an Admin: the box's image and environment stay out of reach.
    staff.user_permissions.add(*Permission.objects.filter(content_type__app_label="agents"))
    reference = Preset.objects.get(slug="reference")
    resp = client.post("/admin/agents/workeragent/add/", _worker_agent_form(worker, reference, image="evil/box"))
    assert resp.status_code == 403 and not WorkerAgent.objects.exists()
    staff.user_permissions.clear()
    staff.groups.add(Group.objects.get(name=ADMINS))  # the Admins group alone is enough
    staff = User.objects.get(pk=staff.pk)
    client.force_login(staff)
    resp = client.post("/admin/agents/workeragent/add/", _worker_agent_form(worker, reference, image="registry.example/box:1"))
    assert resp.status_code == 302 and WorkerAgent.objects.get().image == "registry.example/box:1"
