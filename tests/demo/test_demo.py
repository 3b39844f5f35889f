"""`make demo`'s set-up and report without Docker: exactly three grants and a destination for the demo
worker, and a summary read from the records (a CONNECT's tunnel check is not a request the run made)."""

from __future__ import annotations

import pytest

from controlplane.agents.models import WorkerAgent
from controlplane.audit.services import audit_append
from controlplane.demo import scenario as demo
from controlplane.demo.report import run_facts, summary_line
from controlplane.fleet.services import run_create, worker_create
from controlplane.ledger.models import SpendLine
from controlplane.policy.models import Grant
from controlplane.proposals.models import Destination
from controlplane.vault.models import Secret

PORTS = demo.DemoPorts(model=18091, docs=18092, ask=18093, hook=18094)


def test_setup_gives_the_demo_worker_exactly_its_three_grants(db):
    worker = worker_create(demo.WORKER)
    Grant.objects.create(slug="leftover", worker=worker, host="example.org")
    worker, grants = demo.demo_setup(PORTS, "sk-demo-made-up")
    by_slug = {g.slug: g for g in Grant.objects.filter(worker=worker)}
    assert set(by_slug) == {demo.MODEL_GRANT, demo.DOCS_GRANT, demo.ASK_GRANT}
    model = by_slug[demo.MODEL_GRANT]
    assert model.secret.name == demo.MODEL_SECRET and model.trace and model.inject_header == "authorization"
    assert (model.host, model.port, model.paths) == ("127.0.0.1", 18091, ["/v1/chat/completions"])
    assert by_slug[demo.ASK_GRANT].mode == Grant.Mode.ASK and by_slug[demo.DOCS_GRANT].mode == Grant.Mode.AUTO
    assert Secret.objects.get(name=demo.MODEL_SECRET).kind == "openai"
    agent = WorkerAgent.objects.get(worker=worker)  # what the relay starts for a room's message
    assert (agent.preset.slug, agent.model, agent.base_url) == (
        "reference", demo.SCRIPTED_MODEL, "http://127.0.0.1:18091/v1")
    assert Destination.objects.get(name=demo.DESTINATION).url == "http://127.0.0.1:18094/hook"
    demo.demo_setup(PORTS, "sk-demo-another")  # idempotent: a second demo reuses the worker
    assert Grant.objects.filter(worker=worker).count() == 3


def test_the_summary_comes_from_the_records(db):
    worker = worker_create(demo.WORKER)
    run, _ = run_create(worker, command=["true"])

    def decision(verdict, method, url, grant=None, reason=""):
        audit_append("decision", {"decision_id": url, "method": method, "url": url, "grant": grant},
                     run=run, worker=worker, verdict=verdict, reason=reason)

    decision("allow", "POST", "http://127.0.0.1:18091/v1/chat/completions", demo.MODEL_GRANT)
    decision("allow", "POST", "http://127.0.0.1:18091/v1/chat/completions", demo.MODEL_GRANT)
    decision("allow", "GET", "http://127.0.0.1:18092/docs/notes.txt", demo.DOCS_GRANT)
    decision("deny", "CONNECT", "tunnel://exfil.example.net:443", reason="no_grant")
    decision("deny", "GET", "https://exfil.example.net/x", reason="no_grant")
    audit_append("proposal", {"proposal": "p1", "event": "executed"}, run=run, worker=worker)
    SpendLine.objects.create(worker=worker, run=run, kind="settle", unit="tokens", amount=1234)
    facts = run_facts(run, demo.MODEL_GRANT)
    assert [d["method"] for d in facts.decisions] == ["POST", "POST", "GET", "GET"]
    assert summary_line(facts, True) == (
        "demo: 2 model calls, 1234 tokens metered, 3 allowed, 1 denied, 1 proposals executed, "
        "0 chat messages relayed, 0 chat approvals, 0 notes, 0 knowledge commits, audit OK")
    assert summary_line(facts, True, 1, 1).endswith(", 1 notes, 1 knowledge commits, audit OK")
    assert summary_line(facts, False).endswith("audit BROKEN")


def test_chat_counts_come_from_the_run_s_records_only(db):
    """Messages given to the run and its reply's delivered parts are relayed messages; only decisions made
    from an approvers' room (channel chat) are chat approvals, and another run's records count for nothing."""
    worker = worker_create(demo.WORKER)
    run, _ = run_create(worker, command=["true"])
    other, _ = run_create(worker, command=["true"])

    def record(kind, data, on=run):
        audit_append(kind, data, run=on, worker=worker)

    record("message", {"event": "received", "channel": "demo-room", "message": 1})  # no run yet
    record("message", {"event": "started_run", "channel": "demo-room", "message": 1, "run": run.pk})
    record("message", {"event": "joined_run", "channel": "demo-room", "message": 2, "run": run.pk})
    record("delivery", {"event": "opened", "run": run.pk, "parts": 3})
    record("delivery", {"event": "delivered", "run": run.pk, "channel": "demo-room", "parts": 3})
    record("approval", {"approval": "a1", "event": "decided", "channel": "chat", "status": "approved"})
    record("approval", {"approval": "a2", "event": "decided", "channel": "web", "status": "approved"})
    record("proposal", {"proposal": "p1", "event": "decided", "channel": "chat", "status": "approved"})
    record("proposal", {"proposal": "p2", "event": "decided", "channel": "rule", "status": "approved"})
    record("chat_approval", {"event": "ignored", "why": "not allowlisted", "channel": "chat"})
    record("message", {"event": "started_run", "message": 3, "run": other.pk}, on=other)
    record("approval", {"approval": "a3", "event": "decided", "channel": "chat"}, on=other)
    facts = run_facts(run, demo.MODEL_GRANT)
    assert (facts.chat_messages, facts.chat_approvals) == (5, 2)
    assert ", 5 chat messages relayed, 2 chat approvals, 0 notes" in summary_line(facts, True)
    assert run_facts(other, demo.MODEL_GRANT).chat_approvals == 1


def test_each_demo_gets_a_fresh_conversation_channel_and_the_last_one_is_retired(db, settings, tmp_path):
    """A run's input carries its channel's recent turns: the last demo's room (another Synapse, gone) must
    not become this demo's history. The approvers' room channel is simply pointed at the new room."""
    from controlplane.conversations.models import Channel, ChatServer, Message
    from controlplane.demo import chat
    from controlplane.vault.services import secret_set

    settings.ROSTER_VAULT_KEY_FILE = tmp_path / "vault.key"
    worker = worker_create(demo.WORKER)
    server = ChatServer.objects.create(name=chat.SERVER, homeserver_url="http://127.0.0.1:1",
                                       bot_user_id="@roster-bot-1:roster.test",
                                       access_token=secret_set(chat.BOT_SECRET, "syt_made_up_token_1234"))
    first = chat._save_channel(chat.ROOM, worker, server, "!old:roster.test", Channel.Purpose.CONVERSATION)
    approvers = chat._save_channel(chat.APPROVERS_ROOM, worker, server, "!a1:roster.test",
                                   Channel.Purpose.APPROVALS)
    Message.objects.create(channel=first, direction="in", external_id="$e1", speaker_id="@ana:roster.test",
                           role="member", sent_at="2026-01-01T00:00:00Z", text="last demo's question")
    second = chat._save_channel(chat.ROOM, worker, server, "!new:roster.test", Channel.Purpose.CONVERSATION)
    again = chat._save_channel(chat.APPROVERS_ROOM, worker, server, "!a2:roster.test",
                               Channel.Purpose.APPROVALS)
    first.refresh_from_db()
    assert (first.name, first.enabled) == (f"{chat.ROOM}-{first.pk}", False)
    assert first.room_id == "!old:roster.test"  # its messages stay where they were said
    assert second.pk != first.pk and (second.name, second.enabled) == (chat.ROOM, True)
    assert not Message.objects.filter(channel=second).exists()
    assert again.pk == approvers.pk and again.room_id == "!a2:roster.test"


def test_a_relay_that_does_not_answer_is_named_with_where_to_look(settings):
    from controlplane.demo import chat
    from tools.synapse.homeserver import _free_port

    settings.ROSTER_RELAY_PORT = _free_port()  # nothing listens there
    with pytest.raises(chat.ChatFailed, match=r"the relay does not answer on .*var/log/relay.log"):
        chat._relay_health()
    with pytest.raises(chat.ChatFailed, match=r"the thing did not happen within 0 s; see var/log/relay.log"):
        chat.wait_for(lambda: None, "the thing", 0.1)
