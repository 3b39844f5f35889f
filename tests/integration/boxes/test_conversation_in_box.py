"""The whole conversation through real parts: Ana's message in a Synapse room becomes a run (the relay),
dispatched by a real Celery worker into a real box where the reference agent talks to the scripted model
through the real gateway; the model sees the message as framed user content; the agent's request to an
`ask` host is held, posted to the approvers' room and released by Bob's reaction on the post; the answer
lands in the room, delivered by the relay (the box has no grant to the homeserver)."""

from __future__ import annotations

import json

import pytest
from django.db import connections

from controlplane.approvals.models import Approval
from controlplane.conversations.models import ApprovalPost, Delivery, Message
from controlplane.fleet.models import Run
from controlplane.fleet.services import worker_create
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set
from tests.conftest import GATEWAY_SERVICE_TOKEN  # noqa: F401 - the stack's gateway token
from tests.integration.boxes.conftest import wait_for_run
from tests.integration.boxes.servers import upstream_server
from tests.integration.conversations.conftest import (  # noqa: F401 - fixtures
    RelayProcess,
    bot_messages,
    matrix_rooms,
    people,
    roster_users,
    synapse,
    wait_until,
)
from tests.support import procs
from tools.scripted_model.script import script_parse
from tools.scripted_model.server import scripted_model_server

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]
REAL_KEY = "sk-proj-" + "Ch4tK3y" * 7
ANSWER = "The status page says: upstream says hello."


def test_a_room_message_runs_the_agent_an_approval_from_chat_releases_it_and_the_reply_lands(
        queued_stack, settings, synapse, people, redis_url, tmp_path):  # noqa: F811
    worker = worker_create("chat-agent")
    rooms = matrix_rooms(synapse, people, worker, secret_set)
    roster_users(people)
    secret = secret_set("chat-model-key", REAL_KEY, kind="openai")
    leaf = queued_stack.upstream_ca.leaf()
    with upstream_server(queued_stack.upstream_ca) as (site_port, site), scripted_model_server(
            script_parse({"model": "roster-scripted", "steps": [
                {"say": "Checking the status page.", "tool": "fetch_url",
                 "arguments": {"url": f"https://127.0.0.1:{site_port}/status"}},
                {"say": ANSWER}]}), REAL_KEY, tls=leaf) as (model_port, model):
        Grant.objects.create(slug="chat-model", worker=worker, methods=["POST"], schemes=["https"],
                             host="127.0.0.1", port=model_port, paths=["/v1/chat/completions"], secret=secret,
                             inject_header="authorization", inject_format="Bearer {secret}", trace=True)
        Grant.objects.create(slug="chat-status", worker=worker, methods=["GET"], schemes=["https"],
                             host="127.0.0.1", port=site_port, paths=["/status"], mode="ask")
        db_name = connections["default"].settings_dict["NAME"]
        env = procs.control_plane_env(db_name, redis_url, {
            **{k: str(v) for k, v in queued_stack.settings.items()},
            "ROSTER_AGENT_BASE_URL": f"https://127.0.0.1:{model_port}/v1",
            "ROSTER_AGENT_MODEL": "roster-scripted",
            "ROSTER_RELAY_POLL_SECONDS": "0.1", "ROSTER_RELAY_SYNC_TIMEOUT_MS": "1000"})
        relay = RelayProcess(env, tmp_path)
        relay.start()
        try:
            wait_until(lambda: relay.health()["matrix"].get(str(rooms.server.pk), {}).get("since"),
                       what="first sync", relay=relay)
            synapse.say(people.ana, rooms.conversation.room_id, "What does the status page say?")
            message = wait_until(lambda: Message.objects.filter(channel=rooms.conversation).first(),
                                 what="the message stored", relay=relay)
            post = wait_until(lambda: ApprovalPost.objects.exclude(external_id="").first(), timeout=90,
                              what="the held request posted", relay=relay)
            synapse.react(people.bob, rooms.approvers.room_id, post.external_id, "✅")
            run = wait_for_run(message.run_id, {Run.Status.SUCCEEDED, Run.Status.FAILED}, timeout=120)
            assert run.status == Run.Status.SUCCEEDED, (run.status_reason, run.output[-3000:])
            wait_until(lambda: Delivery.objects.filter(run=run, status="sent").exists(), what="delivered",
                       relay=relay)
            replies = bot_messages(synapse, people.ana, rooms.conversation.room_id, people.bot)
        finally:
            relay.stop()
    assert [r["content"]["body"] for r in replies] == [ANSWER] and run.answer == ANSWER
    # The model got Ana's message as framed user content, never in the system prompt.
    messages = model.bodies[0]["messages"]
    assert "What does the status page say?" not in messages[0]["content"]
    assert f"[turn 1] Ana ({people.ana.user_id}, member)" in messages[1]["content"]
    assert "> What does the status page say?" in messages[1]["content"]
    # Released by Bob's reaction: the status page was fetched once, the approval used.
    approval = Approval.objects.get(run=run)
    assert approval.status == Approval.Status.USED and approval.channel == "chat"
    assert approval.decided_by.get_username() == "bob"
    assert [r["path"] for r in site.requests] == ["/status"]
    assert run.carries_conversation and people.ana.user_id in json.dumps(run.participants)
