# ruff: noqa: E501 - long cases read best on one line
"""Dispatch applies a worker's preset without knowing which agent it is (controlplane.dispatch.agentbox):
the image, the command with the prompt, the preset's and the worker's variables under Roster's own, the
model key's sentinel, the files under /config/preset; every refusal says what to do."""

from __future__ import annotations

import json
from types import SimpleNamespace

import docker
import pytest

from controlplane.agents import services as agent_services
from controlplane.agents.models import Preset, WorkerAgent
from controlplane.agents.spec import validate_preset
from controlplane.dispatch import agentbox
from controlplane.dispatch.box import BOX_CA_BUNDLE, box_create_kwargs
from controlplane.dispatch.preflight import BoxNetwork
from controlplane.dispatch.rundirs import run_dirs_create
from controlplane.dispatch.runinput import run_input_assemble
from controlplane.dispatch.sentinels import sentinel_environment
from controlplane.dispatch.starting import run_start_agent
from controlplane.fleet.services import run_create
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set
from tests.presets.conftest import preset_data

NETWORK = BoxNetwork(name="rst-net", bridge="rst-br", gateway_ip="172.30.0.1")
TOKEN = "rt_" + "A" * 43


@pytest.fixture(autouse=True)
def _vault(settings, tmp_path):
    from controlplane.vault import keyfile, services

    settings.ROSTER_VAULT_KEY_FILE = tmp_path / "keys" / "vault.key"
    keyfile._cache.clear()
    services.invalidate_sentinel_cache()


@pytest.fixture
def pi(worker, settings):
    """The worker runs a pi-like preset against a model on host loopback, with its key granted."""
    settings.ROSTER_BOX_IMAGE = "roster-box:unit"
    spec = validate_preset(preset_data(slug="pi-like", build="workers/presets/pi/build.sh"), custom=True)
    preset = agent_services.preset_save(spec, kind=Preset.Kind.CUSTOM)[0]
    agent_services.worker_agent_set(worker, preset, model="m-1", base_url="http://127.0.0.1:9999/v1",
                                    environment={"TZ": "UTC", "PI_OFFLINE": "0"})
    secret = secret_set("model-key", "real-model-key-0123456789", "openai")
    Grant.objects.create(slug="model", worker=worker, host="127.0.0.1", port=9999, schemes=["http"],
                         paths=["/v1/chat/completions"], methods=["POST"], secret=secret,
                         inject_header="authorization", inject_format="Bearer {secret}")
    return secret


def _box(run):
    run_input = run_input_assemble(run)
    plan = agentbox.box_plan(run, run_input.prompt)
    dirs = run_dirs_create(run, run_input, plan)
    return plan, dirs, box_create_kwargs(run, image_id="sha256:abc", network=NETWORK, token=TOKEN, dirs=dirs,
                                         sentinels=sentinel_environment(run.worker), plan=plan)


def test_an_agent_run_records_its_preset_and_command(worker, pi):
    run = run_start_agent(worker, "Summarise notes.md")
    assert run.task == "Summarise notes.md"
    assert run.command == ["pi", "-p", "--model", "m-1", "Summarise notes.md"]
    assert (run.agent.preset_slug, run.agent.model, run.agent.base_url) == ("pi-like", "m-1", "http://127.0.0.1:9999/v1")


def test_the_box_gets_the_preset(worker, pi, gateway_ca):
    run = run_start_agent(worker, "Summarise notes.md")
    plan, dirs, spec = _box(run)
    assert plan.image == "roster-box-pi:unit"
    assert spec["command"] == ["pi", "-p", "--model", "m-1", "Summarise notes.md"]
    env = spec["environment"]
    assert env["OPENAI_API_KEY"] == pi.sentinel and "real-model-key" not in json.dumps(spec, default=str)
    assert (env["PI_OFFLINE"], env["TZ"], env["PI_BASE"]) == ("0", "UTC", "http://127.0.0.1:9999/v1")  # the worker's wins
    assert env["ROSTER_PRESET"] == "pi-like" and env["ROSTER_AGENT_MODEL"] == "m-1"
    preset_dir = dirs.config / "preset"
    written = preset_dir / ".pi" / "agent" / "models.json"
    assert json.loads(written.read_text())["providers"]["roster"]["baseUrl"] == "http://127.0.0.1:9999/v1"
    assert written.stat().st_mode & 0o777 == 0o644 and (preset_dir / ".pi").stat().st_mode & 0o777 == 0o755
    assert json.loads((dirs.config / "preset.json").read_text()) == plan.manifest
    assert json.loads((dirs.config / "run.json").read_text())["preset"] == "pi-like"
    mounts = {m["Target"]: m for m in spec["mounts"]}
    assert mounts["/config"]["ReadOnly"] is True  # the preset's files with it: invariant 4


def test_roster_variables_win_over_anything_stored(worker, pi, gateway_ca):
    # Rows edited around the services: a preset snapshot and a worker's environment that name Roster's own
    # variables. The snapshot is refused before any box; so is the environment.
    run = run_start_agent(worker, "t")
    run.agent.preset["env"] = {"HTTPS_PROXY": "http://evil:3128"}
    run.agent.save()
    with pytest.raises(Exception, match="invalid"):
        _box(run)
    run2 = run_start_agent(worker, "t")
    WorkerAgent.objects.filter(worker=worker).update(environment={"NODE_EXTRA_CA_CERTS": "/var/evil.pem"})
    with pytest.raises(agentbox.BoxPlanRefused, match="invalid as stored"):
        _box(run2)
    # And box_environment keeps Roster's on top whatever a plan says.
    plan = agentbox.BoxPlan(image="i", command=("x",), env={"HTTPS_PROXY": "http://evil", "HOME": "/", "SSL_CERT_FILE": "/x",
                                                          "ROSTER_RUN_ID": "9", "OPENAI_API_KEY": "sk-fake"},
                            key_variable="OPENAI_API_KEY", key_sentinel=pi.sentinel, preset="p")
    dirs = run_dirs_create(run2)
    env = box_create_kwargs(run2, image_id="i", network=NETWORK, token=TOKEN, dirs=dirs, sentinels={}, plan=plan)["environment"]
    assert env["HTTPS_PROXY"].startswith("http://run:") and env["HOME"] == "/workspace"
    assert env["SSL_CERT_FILE"] == BOX_CA_BUNDLE and env["ROSTER_RUN_ID"] == str(run2.pk)
    assert env["OPENAI_API_KEY"] == pi.sentinel


def test_a_plain_command_gets_the_workers_image_and_environment(worker, gateway_ca, settings):
    agent_services.worker_agent_set(worker, Preset.objects.get(slug="reference"), image="registry.example/box:7",
                                    environment={"TZ": "UTC"})
    run, _ = run_create(worker, command=["sh", "-c", "echo $TZ"])
    plan, _dirs, spec = _box(run)
    assert plan.image == "registry.example/box:7" and plan.manifest is None
    assert spec["command"] == ["sh", "-c", "echo $TZ"] and spec["environment"]["TZ"] == "UTC"
    assert "ROSTER_PRESET" not in spec["environment"]


def test_no_model_grant_is_a_refusal_that_says_what_to_do(worker, pi):
    Grant.objects.all().delete()
    run = run_start_agent(worker, "t")
    with pytest.raises(agentbox.BoxPlanRefused) as caught:
        agentbox.box_plan(run, "t")
    assert "127.0.0.1:9999" in str(caught.value) and "preset suggest-grants" in str(caught.value)


@pytest.mark.parametrize(("grant", "found"), [
    ({"host": "127.0.0.1", "port": 9999, "schemes": ["http"]}, True),
    ({"host": "127.0.0.1", "port": None, "schemes": ["http"]}, False),  # port 80, not 9999
    ({"host": "127.0.0.1", "port": 9999, "schemes": ["https"]}, False),
    ({"host": "127.0.0.2", "port": 9999, "schemes": ["http"]}, False),
    ({"host": "127.0.0.1", "port": 9999, "schemes": ["http"], "enabled": False}, False),
    ({"host": "127.0.0.1", "port": 9999, "schemes": ["http"], "mode": "deny"}, False),
])
def test_which_grant_holds_the_model_key(worker, pi, grant, found):
    Grant.objects.all().delete()
    Grant.objects.create(slug="g", worker=worker, secret=pi, inject_header="authorization", **grant)
    if found:
        assert agentbox.model_key_sentinel(worker, "http://127.0.0.1:9999/v1") == pi.sentinel
    else:
        with pytest.raises(agentbox.BoxPlanRefused, match="no grant"):
            agentbox.model_key_sentinel(worker, "http://127.0.0.1:9999/v1")


def test_two_keys_toward_one_host_is_a_refusal(worker, pi):
    other = secret_set("second", "second-real-0123456789", "openai")
    Grant.objects.create(slug="other", host="127.0.0.1", port=9999, schemes=["http"], secret=other,
                         inject_header="authorization", paths=["/v2/**"])
    with pytest.raises(agentbox.BoxPlanRefused, match="different secrets"):
        agentbox.model_key_sentinel(worker, "http://127.0.0.1:9999/v1")


def test_a_missing_image_names_its_build(worker, pi):
    run = run_start_agent(worker, "t")
    plan = agentbox.box_plan(run, "t")

    def missing(name):
        raise docker.errors.ImageNotFound(name)

    client = SimpleNamespace(images=SimpleNamespace(get=missing))
    with pytest.raises(agentbox.BoxPlanRefused) as caught:
        agentbox.plan_image_id(client, plan)
    assert str(caught.value) == "preset pi-like's image roster-box-pi:unit is missing: build it with workers/presets/pi/build.sh"


def test_a_queued_run_keeps_its_preset_as_it_was(worker, pi):
    run = run_start_agent(worker, "t")
    spec = validate_preset(preset_data(slug="pi-like", build="x", command=["other", "{prompt}"]), custom=True)
    agent_services.preset_save(spec, kind=Preset.Kind.CUSTOM)
    assert agentbox.box_plan(run, "t").command[0] == "pi"
    assert agentbox.box_plan(run_start_agent(worker, "t"), "t").command[0] == "other"


def test_the_run_command_starts_the_workers_agent(worker, pi):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("run", "start", worker.name, "--agent", "Tidy up", stdout=out)
    run = worker.runs.get()
    assert out.getvalue().startswith(f"run {run.pk}: queued") and run.agent.preset_slug == "pi-like"
    assert run.command[-1] == "Tidy up"
