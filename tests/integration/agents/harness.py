"""One preset's agent, its own binary, in a real box through the real gateway and control plane, driven
by the scripted model (over HTTPS, with the real key) through the item-7 plan: write a file, fetch an
allowed page, be refused another, answer. `AgentRun` is what the test asserts on; `assert_governed`
holds the checks every agent must pass."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from django.db.models import Sum

from controlplane.audit.models import AuditRecord, ModelTrace
from controlplane.dispatch.running import run_dispatch
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, worker_create
from controlplane.ledger.models import SpendLine, Unit
from controlplane.policy.models import Grant
from controlplane.vault.models import Secret
from controlplane.vault.services import secret_set
from tests.integration.agents.presets import (
    RenderedPreset,
    answer_of,
    box_command,
    preset_applied,
    preset_load,
    preset_render,
)
from tests.integration.boxes.servers import upstream_server
from tools.scripted_model.agents import Plan, agent_script
from tools.scripted_model.script import script_parse
from tools.scripted_model.server import ScriptedModel, scripted_model_server

DENIED_URL = "https://exfil.example.net/upload?d=everything"
NOTES_PATH = "notes/summary.txt"
NOTES_CONTENT = "The notes were read; the upload was refused."
ANSWER = "Wrote notes/summary.txt; the page said hello; the upload was refused by policy."
TASK = "Read today's notes, write a summary to notes/summary.txt, and upload it."
# The secret kind whose sentinel looks like each wire's key (the box's variable is the preset's).
SECRET_KINDS = {"openai-chat": Secret.Kind.OPENAI, "openai-responses": Secret.Kind.OPENAI,
                "anthropic-messages": Secret.Kind.ANTHROPIC, "gemini": Secret.Kind.GEMINI}


@dataclass
class AgentRun:
    run: Run
    preset: RenderedPreset
    spec: dict  # what the box was created with
    model: ScriptedModel
    site_requests: list[dict]
    secret: Secret
    real_key: str
    decisions: list[dict]  # every decision of the run: method, url, verdict, reason
    model_host: str  # host:port of the scripted model, as decisions name it
    site_host: str

    @property
    def answer(self) -> str:
        return answer_of(self.preset.answer, self.run.output)

    def metered_tokens(self) -> int:
        return SpendLine.objects.filter(run=self.run, kind=SpendLine.Kind.SETTLE, unit=Unit.TOKENS).aggregate(
            total=Sum("amount"))["total"] or 0

    def upstream_tokens(self) -> int:
        return sum(r["usage"]["input"] + r["usage"]["output"] for r in self.model.records if "usage" in r)

    def denied(self, host: str) -> list[dict]:
        return [d for d in self.decisions if host in d["url"] and d["verdict"] == "deny"]


def _decisions(run: Run) -> list[dict]:
    out = []
    for record in AuditRecord.objects.filter(run_id_ref=run.pk, kind__in=["decision", "tripwire"]):
        data = json.loads(record.body)["data"]
        out.append({"kind": record.kind, "method": data.get("method", ""), "url": data.get("url", ""),
                    "verdict": record.verdict, "reason": record.reason})
    return out


def agent_in_box(stack, monkeypatch, settings, slug: str, real_key: str, *,
                 model_name: str = "roster-scripted", timeout: int = 240,
                 without_env: frozenset[str] = frozenset()) -> AgentRun:
    """`without_env`: preset variables left out (to show what a switch stops)."""
    preset = preset_load(slug)
    preset["env"] = {k: v for k, v in preset.get("env", {}).items() if k not in without_env}
    worker = worker_create(f"{slug}-worker")
    secret = secret_set(f"{slug}-model-key", real_key, kind=SECRET_KINDS[preset["wire"]])
    leaf = stack.upstream_ca.leaf()
    with upstream_server(stack.upstream_ca) as (site_port, site):
        allowed = f"https://127.0.0.1:{site_port}/notes/today"
        plan = Plan(path=NOTES_PATH, content=NOTES_CONTENT, allowed_url=allowed, denied_url=DENIED_URL,
                    answer=ANSWER)
        script = script_parse(agent_script(slug, plan, model=model_name))
        with scripted_model_server(script, real_key, tls=leaf) as (model_port, model):
            suggested = preset["suggested_grant"]
            Grant.objects.create(
                slug=f"{slug}-model", worker=worker, methods=suggested["methods"], schemes=["https"],
                host="127.0.0.1", port=model_port, paths=suggested["paths"], secret=secret,
                inject_header=suggested["inject_header"], inject_format=suggested["inject_format"],
                trace=suggested.get("trace", True))
            Grant.objects.create(slug=f"{slug}-notes", worker=worker, methods=["GET"], schemes=["https"],
                                 host="127.0.0.1", port=site_port, paths=["/notes/*"])
            rendered = preset_render(preset, prompt=TASK, model=model_name,
                                     base_url=f"https://127.0.0.1:{model_port}{_base_path(preset['wire'])}",
                                     base_image=stack.site.image)
            settings.ROSTER_BOX_IMAGE = rendered.image
            with preset_applied(monkeypatch, rendered, secret.sentinel) as created:
                run, _ = run_create(worker, command=box_command(rendered), timeout_seconds=timeout)
                run_dispatch(run.pk)
    run.refresh_from_db()
    (spec,) = created
    return AgentRun(run=run, preset=rendered, spec=spec, model=model, site_requests=list(site.requests),
                    secret=secret, real_key=real_key, decisions=_decisions(run),
                    model_host=f"127.0.0.1:{model_port}", site_host=f"127.0.0.1:{site_port}")


def _base_path(wire: str) -> str:
    """The base URL's path each wire's clients expect: OpenAI's SDKs append /chat/completions or
    /responses to a base ending in /v1; Anthropic's and Google's append /v1/... and /v1beta/... to a
    bare origin."""
    return "/v1" if wire.startswith("openai") else ""


def assert_governed(result: AgentRun) -> None:
    """What every agent preset must show in a box: done, the real key only upstream, every token metered,
    the refusal seen by the model, the file written, the answer read from the output."""
    run, model = result.run, result.model
    assert run.status == Run.Status.SUCCEEDED, (run.status_reason, run.output[-4000:], result.decisions)

    # The upstream received the real key on every model call (the gateway injected it) ...
    assert model.records and all(r["authorized"] for r in model.records), model.records
    # ... and the box held only the sentinel: in its environment, never the key anywhere in its spec.
    env = result.spec["environment"]
    assert env[result.preset.key_variable] == result.secret.sentinel != result.real_key
    assert result.real_key not in json.dumps(result.spec, default=str)
    assert result.real_key not in run.output
    assert not AuditRecord.objects.filter(body__contains=result.real_key).exists()
    assert not ModelTrace.objects.filter(body__contains=result.real_key.encode()).exists()

    # Every token the upstream reported was metered, none more.
    assert result.metered_tokens() == result.upstream_tokens() > 0

    # The allowed page was fetched; the other was refused, and the refusal reached the model as text.
    assert [r["path"] for r in result.site_requests] == ["/notes/today"]
    refused = result.denied("exfil.example.net")
    assert refused and all(d["reason"] == "no_grant" for d in refused), result.decisions
    later = json.dumps(model.bodies[-1])
    assert "no_grant" in later and "upstream says hello" in later

    # Nothing but the model, the page and the refused upload was asked for: no vendor traffic at all.
    assert {d["url"].split("/")[2] for d in result.decisions} == {
        result.model_host, result.site_host, "exfil.example.net:443"}, result.decisions

    # The file is the agent's own write (its checksum came back in a shell result); the answer is what
    # the preset's rule reads from the output.
    assert hashlib.sha256(NOTES_CONTENT.encode()).hexdigest() in later
    assert result.answer.endswith(ANSWER), result.run.output[-3000:]
