"""`make demo AGENT=<preset>`'s set-up without Docker: the demo worker runs that preset on the scripted
model with the preset's own model grant (path, key header) and a key of its wire's kind, no grant held
for approval; the script drives that agent's own tools."""

from __future__ import annotations

import pytest

from controlplane.agents.models import WorkerAgent
from controlplane.demo import agents as demo_agents
from controlplane.demo import scenario as demo
from controlplane.policy.models import Grant
from controlplane.vault.models import Secret

PORTS = demo.DemoPorts(model=18091, docs=18092, ask=18093, hook=18094)
EXPECTED = {  # slug: (secret kind, model path, key header, base URL)
    "pi": ("openai", ["/v1/chat/completions"], "authorization", "http://127.0.0.1:18091/v1"),
    "claude-code": ("anthropic", ["/v1/messages"], "x-api-key", "http://127.0.0.1:18091"),
    "gemini-cli": ("gemini", ["/v1beta/models/*"], "x-goog-api-key", "http://127.0.0.1:18091"),
}


def test_every_scripted_agent_is_a_demo_choice():
    assert demo_agents.agents() == ["reference", "claude-code", "codex", "gemini-cli", "opencode", "pi"]


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_setup_runs_the_preset_on_the_scripted_model(db, slug):
    kind, paths, header, base_url = EXPECTED[slug]
    key = demo_agents.demo_key(slug)
    worker, grants = demo_agents.setup(slug, PORTS, key)
    by_slug = {g.slug: g for g in Grant.objects.filter(worker=worker)}
    assert set(by_slug) == {demo.MODEL_GRANT, demo.DOCS_GRANT} == {g.slug for g in grants}
    model = by_slug[demo.MODEL_GRANT]
    assert (model.paths, model.inject_header, model.secret.name) == (paths, header, demo.MODEL_SECRET)
    assert Secret.objects.get(name=demo.MODEL_SECRET).kind == kind
    agent = WorkerAgent.objects.get(worker=worker)
    assert (agent.preset.slug, agent.model, agent.base_url) == (slug, demo.SCRIPTED_MODEL, base_url)
    script = demo_agents.script(slug, PORTS)
    assert "http://127.0.0.1:18092/docs/notes.txt" in str(script["steps"][1])
    assert script["steps"][-1] == {"say": demo_agents.ANSWER}
    # back to the reference agent: its three grants again
    demo.demo_setup(PORTS, "sk-demo-another")
    assert Grant.objects.filter(worker=worker).count() == 3
