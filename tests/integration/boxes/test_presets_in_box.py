# ruff: noqa: E501 - the probe's shell lines and long assertions read best whole
"""Dispatch runs a worker's preset in a real box (`run start --agent`'s path: run_start_agent, then the
dispatch task), through the real gateway and control plane: the preset's command with the prompt, its
variables under Roster's own, its files read-only under /config/preset and copied or linked into $HOME by
the box runtime, the prompt on stdin, the model key's sentinel under its key variable, the answer by its
rule; a missing image and a missing model grant refuse the run saying what to do."""

from __future__ import annotations

import json

import pytest

from controlplane.agents import services as agent_services
from controlplane.agents.models import Preset
from controlplane.agents.spec import validate_preset
from controlplane.dispatch.running import run_dispatch
from controlplane.dispatch.starting import run_start_agent
from controlplane.fleet.models import Run
from controlplane.fleet.services import worker_create
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set
from tools.scripted_model.script import script_parse
from tools.scripted_model.server import scripted_model_server

pytestmark = [pytest.mark.integration, pytest.mark.docker]

REAL_KEY = "sk-proj-" + "Pr3s3tK3y" * 5
# What the box checks about itself, in plain sh: each line is a fact the test reads back.
PROBE = r"""
set -u
echo "key=$OPENAI_API_KEY"
echo "proxy=$HTTPS_PROXY"
echo "mode=$PROBE_MODE tz=$TZ home=$HOME preset=$ROSTER_PRESET"
echo "copy=$(cat "$HOME/.probe/settings.json")"
echo "scratch" >> "$HOME/.probe/settings.json" && echo "copy-writable=yes"
[ -L "$HOME/linked.txt" ] && echo "link=$(readlink "$HOME/linked.txt")"
( echo x >> /config/preset/linked.txt ) 2>/dev/null && echo "original-writable=YES" || echo "original-writable=no"
( echo x >> "$HOME/linked.txt" ) 2>/dev/null && echo "link-writable=YES" || echo "link-writable=no"
echo "stdin=$(cat)"
echo "argv=$1"
echo "the answer is $(cat /config/prompt.md | wc -c) bytes of prompt"
"""


def _probe_preset() -> Preset:
    spec = validate_preset({
        "slug": "probe", "title": "a shell probe", "wire": "openai-chat", "answer": "last-line",
        "command": ["sh", "-c", PROBE, "probe", "{prompt}"], "stdin": "prompt", "key_variable": "OPENAI_API_KEY",
        "default_model": "m", "env": {"PROBE_MODE": "preset", "TZ": "Europe/Paris"},
        "files": [{"path": ".probe/settings.json", "mode": "copy", "content": '{"base": "{base_url}"}'},
                  {"path": "linked.txt", "mode": "link", "content": "read-only"}],
    }, custom=True)
    return agent_services.preset_save(spec, kind=Preset.Kind.CUSTOM)[0]


def _facts(output: str) -> dict[str, str]:
    facts = {}
    for line in output.splitlines():
        name, eq, value = line.partition("=")
        if eq and (name.isidentifier() or name in ("copy-writable", "original-writable", "link-writable")):
            facts[name] = value
    return facts


def _model_grant(worker, secret, port: int, *, scheme: str = "http") -> None:
    Grant.objects.create(slug=f"{worker.name}-model", worker=worker, host="127.0.0.1", port=port,
                         schemes=[scheme], methods=["POST"], paths=["/v1/chat/completions"], secret=secret,
                         inject_header="authorization", inject_format="Bearer {secret}", trace=True,
                         wire="openai-chat")


def test_a_preset_in_a_box(stack):
    worker = worker_create("preset-probe")
    secret = secret_set("probe-key", REAL_KEY, kind="openai")
    _model_grant(worker, secret, 9999)
    agent_services.worker_agent_set(worker, _probe_preset(), base_url="http://127.0.0.1:9999/v1",
                                    environment={"TZ": "UTC"})
    run = run_start_agent(worker, "Count the notes.", timeout=60)
    run_dispatch(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, (run.status_reason, run.output[-2000:])
    facts = _facts(run.output)
    assert facts["key"] == secret.sentinel and REAL_KEY not in run.output
    assert facts["proxy"].startswith("http://run:") and f":{stack.site.gateway_port}" in facts["proxy"]
    assert facts["mode"] == "preset tz=UTC home=/workspace preset=probe"  # the worker's TZ over the preset's
    assert facts["copy"] == '{"base": "http://127.0.0.1:9999/v1"}' and facts["copy-writable"] == "yes"
    assert facts["link"] == "/config/preset/linked.txt"
    assert facts["original-writable"] == "no" and facts["link-writable"] == "no"  # invariant 4
    assert facts["stdin"] == "Count the notes." and facts["argv"] == "Count the notes."
    assert run.answer == "the answer is 16 bytes of prompt"  # the preset's rule: last-line
    assert run.image_id and run.agent.preset_slug == "probe"


def test_the_reference_preset_runs_the_reference_agent(stack):
    worker = worker_create("preset-reference")
    secret = secret_set("ref-key", REAL_KEY, kind="openai")
    script = script_parse({"model": "roster-scripted", "steps": [{"say": "All notes counted: 3."}]})
    with scripted_model_server(script, REAL_KEY) as (port, model):
        _model_grant(worker, secret, port)
        agent_services.worker_agent_set(worker, Preset.objects.get(slug="reference"), model="roster-scripted",
                                        base_url=f"http://127.0.0.1:{port}/v1")
        run = run_start_agent(worker, "Count the notes.", timeout=60)
        assert run.command[:3] == ["python3", "-m", "workers.agent"] and run.command[-1] == "Count the notes."
        run_dispatch(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, (run.status_reason, run.output[-2000:])
    assert run.answer == "All notes counted: 3."
    assert len(model.records) == 1 and model.records[0]["authorized"]  # the real key, injected in transit
    assert REAL_KEY not in run.output


def test_a_missing_image_refuses_the_run_naming_its_build(stack):
    worker = worker_create("preset-missing")
    secret = secret_set("missing-key", REAL_KEY, kind="openai")
    _model_grant(worker, secret, 9999)
    data = {**agent_services.preset_data(_probe_preset()), "slug": "probe-missing",
            "image": "roster-box-nothing-here:never", "build": "workers/presets/nothing/build.sh"}
    preset = agent_services.preset_save(validate_preset(data, custom=True), kind=Preset.Kind.CUSTOM)[0]
    agent_services.worker_agent_set(worker, preset, base_url="http://127.0.0.1:9999/v1")
    run = run_start_agent(worker, "t", timeout=60)
    run_dispatch(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.REFUSED
    assert run.status_reason == ("preset probe-missing's image roster-box-nothing-here:never is missing: build it "
                                 "with workers/presets/nothing/build.sh")
    assert not run.container_id


def test_no_model_grant_refuses_the_run_before_any_box(stack, docker_client):
    worker = worker_create("preset-no-key")
    agent_services.worker_agent_set(worker, _probe_preset(), base_url="http://127.0.0.1:9999/v1")
    run = run_start_agent(worker, "t", timeout=60)
    run_dispatch(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.REFUSED and "preset suggest-grants preset-no-key" in run.status_reason
    assert not docker_client.containers.list(all=True, filters={"label": f"roster.run={run.pk}"})
    assert json.loads(json.dumps(run.status_reason))  # plain text, safe to show
