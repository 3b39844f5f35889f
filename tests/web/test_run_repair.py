"""Repairs of a run, from the timeline and the command line (docs/memory.md, "Repair"): forgetting every
note it wrote, correcting them (the notes list filtered by the run), requeueing its task as a new run of the
same worker with the same task and input origin. Each names the run it repairs on the record (`repair`);
a live run is not requeued; only admins repair; the chain verifies after all of them."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_sequential
from controlplane.conversations.models import Channel, ChatServer
from controlplane.conversations.selectors import conversation_for_run
from controlplane.conversations.services import Inbound
from controlplane.dispatch.requeue import RequeueRefused, run_requeue
from controlplane.dispatch.runinput import conversation_of, run_input_assemble
from controlplane.dispatch.running import run_claim
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status
from controlplane.memory.services import note_write
from controlplane.relay.intake import message_into_work
from controlplane.vault.services import secret_set

ANA = "@ana:roster.test"


@pytest.fixture(autouse=True)
def no_dispatch(monkeypatch, settings, tmp_path):
    settings.ROSTER_VAULT_KEY_FILE = tmp_path / "vault.key"
    monkeypatch.setattr("controlplane.dispatch.tasks.dispatch_run.delay", lambda run_id: None)


@pytest.fixture
def conversation_run(worker):
    server = ChatServer.objects.create(
        name="hs",
        homeserver_url="http://127.0.0.1:1",
        bot_user_id="@bot:roster.test",
        access_token=secret_set("bot", "syt_x_y_z"),
    )
    channel = Channel.objects.create(
        name="ops", kind="matrix", worker=worker, server=server, room_id="!r:roster.test"
    )
    _, run, _ = message_into_work(
        channel,
        Inbound("$1", ANA, "Ana", datetime(2026, 11, 30, tzinfo=UTC), "Please summarise the incident."),
    )
    claimed, _ = run_claim(run.pk)
    run_input_assemble(claimed, conversation_of(claimed))
    run_set_status(run.pk, "running")
    run_set_status(run.pk, "failed", exit_code=1)
    run.refresh_from_db()
    return run


def _repairs() -> list[tuple[int | None, dict]]:
    return [
        (r.run_id_ref, json.loads(r.body)["data"])
        for r in AuditRecord.objects.filter(kind="repair").order_by("seq")
    ]


def test_requeue_from_the_timeline_is_a_new_run_naming_the_original(client, admin_user, conversation_run):
    client.force_login(admin_user)
    original = conversation_run
    before = client.get(f"/runs/{original.pk}/").content.decode()
    assert 'id="requeue"' in before and "HOOK(knowledge" not in before  # the hook is a template comment
    response = client.post(f"/runs/{original.pk}/repair/requeue/")
    new = Run.objects.get(requeue_of=original)
    assert response.status_code == 302 and response.url == f"/runs/{new.pk}/"
    assert new.worker == original.worker and new.task == original.task and new.origin == original.origin
    assert new.filed_by == admin_user and new.status == Run.Status.QUEUED
    # The same input origin: the new run's conversation is the original's messages.
    assert conversation_for_run(new) == conversation_for_run(original)
    timeline = client.get(f"/runs/{new.pk}/").content.decode()
    assert f'Requeue of <a href="/runs/{original.pk}/">run {original.pk}</a>' in timeline
    assert f"requeue of run {original.pk} (by {admin_user.username})" in timeline
    assert (
        f'Requeued as <a href="/runs/{new.pk}/">run {new.pk}</a>'
        in client.get(f"/runs/{original.pk}/").content.decode()
    )
    assert _repairs() == [
        (
            new.pk,
            {
                "action": "requeue",
                "repairs": original.pk,
                "run": new.pk,
                "worker": original.worker.name,
                "by": admin_user.username,
            },
        )
    ]


def test_a_live_run_is_not_requeued_and_nothing_changes(client, admin_user, worker):
    client.force_login(admin_user)
    live, _ = run_create(worker, command=["sleep", "9"], task="wait")
    assert 'id="requeue-live"' in client.get(f"/runs/{live.pk}/").content.decode()
    refused = client.post(f"/runs/{live.pk}/repair/requeue/")
    assert refused.status_code == 409 and f"run {live.pk} is still queued" in refused.content.decode()
    assert "Nothing was changed" in refused.content.decode()
    with pytest.raises(CommandError, match="still queued"):
        call_command("run", "requeue", str(live.pk), "--user", admin_user.username, stdout=io.StringIO())
    assert Run.objects.count() == 1 and not _repairs()


def test_the_requeue_command_for_admins_only(admin_user, approver, worker):
    ended, _ = run_create(worker, command=["echo", "hi"], task="say hi")
    run_set_status(ended.pk, "cancelled", "by a person")
    with pytest.raises(CommandError, match="not an admin"):
        call_command("run", "requeue", str(ended.pk), "--user", approver.username)
    with pytest.raises(CommandError, match="no active user"):
        call_command("run", "requeue", str(ended.pk), "--user", "ghost")
    with pytest.raises(CommandError, match="no run 99999"):
        call_command("run", "requeue", "99999", "--user", admin_user.username)
    with pytest.raises(RequeueRefused):
        run_requeue(ended.pk, by=approver)
    out = io.StringIO()
    call_command(
        "run", "requeue", str(ended.pk), "--user", admin_user.username, stdout=out, stderr=io.StringIO()
    )
    new = Run.objects.get(requeue_of=ended)
    assert out.getvalue().strip() == f"run {new.pk}: queued: requeue of run {ended.pk}"
    assert new.command == ["echo", "hi"] and new.task == "say hi"


def test_forgetting_a_runs_notes_from_its_timeline(client, admin_user, conversation_run, worker):
    client.force_login(admin_user)
    run = conversation_run
    mine = note_write(worker, "person", "Ana asked for a summary.", channel="ops", person=ANA, run=run)
    other = note_write(worker, "worker", "Unrelated.")
    timeline = client.get(f"/runs/{run.pk}/").content.decode()
    assert (
        f'href="/memory/?run={run.pk}" id="correct-run-notes"' in timeline
        and 'id="forget-run-notes"' in timeline
    )
    confirm = client.get(f"/runs/{run.pk}/repair/forget-notes/").content.decode()
    assert "Ana asked for a summary." in confirm and f'A repair of <a href="/runs/{run.pk}/">' in confirm
    assert client.post(f"/runs/{run.pk}/repair/forget-notes/", {"reason": "r" * 301}).status_code == 400
    mine.refresh_from_db()
    assert mine.text and not _repairs()
    assert client.post(f"/runs/{run.pk}/repair/forget-notes/", {"reason": "bad run"}).status_code == 302
    mine.refresh_from_db()
    other.refresh_from_db()
    assert mine.text == "" and other.text == "Unrelated."
    assert _repairs() == [
        (
            run.pk,
            {
                "action": "forget_notes",
                "repairs": run.pk,
                "run": run.pk,
                "worker": worker.name,
                "notes": [mine.pk],
                "by": admin_user.username,
                "reason": "bad run",
            },
        )
    ]
    # The command writes the same repair record (nothing left to forget: an empty list, still named).
    call_command("memory", "forget-run", str(run.pk), "--user", admin_user.username, stdout=io.StringIO())
    assert _repairs()[-1][1]["notes"] == [] and _repairs()[-1][1]["repairs"] == run.pk
    timeline = client.get(f"/runs/{run.pk}/").content.decode()
    assert (
        "Ana asked for a summary." not in timeline
        and f"repair of run {run.pk}: forgot note {mine.pk}" in timeline
    )
    client.post(f"/runs/{run.pk}/repair/requeue/")
    assert verify_sequential().ok
