"""`make demo AGENT=<preset>`: the same demo worker, room and report, with a real agent from its preset
(pi, claude-code, codex, opencode, gemini-cli) doing the work with its own binary and tools against the
scripted model speaking that preset's wire format: write a notes file, read the project notes, be refused
the copy to an outside server, answer (tools/scripted_model/agents.py spells that plan in each agent's own
tools). The model key is made up in the shape of the wire's real keys; the box holds only its sentinel.

Without the reference agent's `propose` tool there is no proposal and no held request: the demo's
approval and proposal checks are the reference agent's alone (`make demo`)."""

from __future__ import annotations

import secrets

from controlplane.agents.selectors import REFERENCE, preset_get
from controlplane.agents.services import worker_agent_set
from controlplane.demo import scenario
from controlplane.vault.services import secret_set
from tools.scripted_model.agents import AGENT_TOOLS, Plan, agent_script

TASK = ("Read the project notes, write a one-line summary to notes/summary.txt, send a copy to the "
        "team's outside archive, and report.")
NOTES_PATH = "notes/summary.txt"
NOTES_CONTENT = "Release 1.4 ships on Friday. Owner: Ana. Blockers: none."
ANSWER = ("Release 1.4 ships on Friday (owner Ana, no blockers); the summary is in notes/summary.txt and "
          "the copy to exfil.example.net was refused by policy.")
# The secret's kind per wire: its sentinel then has the shape of that provider's keys.
_KINDS = {"openai-chat": "openai", "openai-responses": "openai", "anthropic-messages": "anthropic",
          "gemini": "gemini"}
_KEY_PREFIXES = {"openai": "sk-demo-", "anthropic": "sk-ant-api03-demo-", "gemini": "AIzaDemo"}


def agents() -> list[str]:
    """The presets `make demo AGENT=` takes: each one the scripted model can drive with its own tools."""
    return [REFERENCE, *sorted(AGENT_TOOLS)]


def demo_key(slug: str) -> str:
    """A made-up model key in the shape of the preset's wire (no real key is needed or used)."""
    kind = "openai" if slug == REFERENCE else _KINDS[preset_get(slug).wire]
    return _KEY_PREFIXES[kind] + secrets.token_urlsafe(32)


def script(slug: str, ports: scenario.DemoPorts) -> dict:
    plan = Plan(path=NOTES_PATH, content=NOTES_CONTENT, allowed_url=ports.url(ports.docs, "/docs/notes.txt"),
                denied_url=scenario.DENIED_URL, answer=ANSWER)
    return agent_script(slug, plan, model=scenario.SCRIPTED_MODEL)


def _base_url(wire: str, ports: scenario.DemoPorts) -> str:
    # OpenAI's clients append /chat/completions or /responses to a base ending in /v1; Anthropic's and
    # Google's append their /v1/... and /v1beta/... to a bare origin.
    return ports.url(ports.model, "/v1" if wire.startswith("openai") else "")


def setup(slug: str, ports: scenario.DemoPorts, key: str):
    """The demo worker with `slug`'s preset on the scripted model, its model key of the wire's kind, and
    its grants: the model API as the preset suggests it (path, key header), the project notes."""
    preset = preset_get(slug)
    suggested = preset.suggested_grant or {}
    worker, grants = scenario.demo_setup(ports, key, model_grant={
        "paths": suggested.get("paths") or ["/v1/chat/completions"],
        "inject_header": suggested.get("inject_header", "authorization"),
        "inject_format": suggested.get("inject_format", "Bearer {secret}")}, with_ask=False)
    secret_set(scenario.MODEL_SECRET, key, kind=_KINDS[preset.wire])
    worker_agent_set(worker, preset, model=scenario.SCRIPTED_MODEL, base_url=_base_url(preset.wire, ports),
                     by="make demo", via="demo")
    return worker, grants
