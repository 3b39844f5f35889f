"""The reference agent's propose tool and `make demo`'s scripted proposals speak the schema the control
plane enforces (a drift here would make the demo's proposals 422)."""

from __future__ import annotations

import json

import pytest

from controlplane.demo import scenario as demo
from controlplane.demo.proposals import email_step
from controlplane.proposals.schemas import parse_proposal
from workers.agent import net, tools
from workers.agent.config import AgentConfig


def _proposal_steps() -> list[dict]:
    script = demo.demo_script(demo.DemoPorts(model=1, docs=2, ask=3, hook=4))
    return [step for step in script["steps"] if step.get("tool") == "propose"]


def test_demo_proposes_a_post_an_email_and_a_note():
    assert [s["arguments"]["kind"] for s in _proposal_steps()] == ["webhook", "email", "memory_note"]
    assert email_step() in _proposal_steps()


@pytest.mark.parametrize("step", _proposal_steps())
def test_demo_proposals_parse(step, monkeypatch, tmp_path):
    sent = {}

    def fake_send(method, url, *, headers=None, body=None, timeout=60.0, **_):
        sent.update(method=method, url=url, body=body)
        return net.Reply(201, {}, b'{"id": "x", "status": "pending"}')

    monkeypatch.setattr(net, "send", fake_send)
    config = AgentConfig(base_url="http://model.invalid/v1", model="m", api_key="k", workspace=tmp_path)
    answer = tools.run_tool(config, "propose", json.dumps(step["arguments"]))
    assert answer.startswith("proposal recorded (HTTP 201)")
    assert sent["method"] == "POST" and sent["url"] == "http://proposals.roster.invalid/v1/proposals"
    parsed = parse_proposal(sent["body"])
    assert parsed.kind == step["arguments"]["kind"] and parsed.reason
