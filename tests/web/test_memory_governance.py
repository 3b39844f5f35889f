"""Memory governance on the web (docs/memory.md): admins list notes by person, channel, worker or run, see
everything held about a person (notes, runs they were in, messages they sent), correct and forget with the
same audit as the `memory` command; approvers, auditors and people with no role get 403 and change nothing;
a POST without the CSRF token changes nothing; bad input is refused beside the field, nothing changed."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.test import Client

from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_sequential
from controlplane.conversations.models import Channel, ChatServer
from controlplane.conversations.services import Inbound
from controlplane.dispatch.runinput import conversation_of, run_input_assemble
from controlplane.dispatch.running import run_claim
from controlplane.fleet.services import run_set_status
from controlplane.memory.models import Note
from controlplane.memory.services import note_write
from controlplane.relay.intake import message_into_work
from controlplane.vault.services import secret_set

ANA = "@ana:roster.test"
FACT = "Ana's new flat is at 12 Harbour Lane."
OTHER = "The ops room meets on Mondays."


@pytest.fixture(autouse=True)
def no_dispatch(monkeypatch, settings, tmp_path):
    settings.ROSTER_VAULT_KEY_FILE = tmp_path / "vault.key"
    monkeypatch.setattr("controlplane.dispatch.tasks.dispatch_run.delay", lambda run_id: None)


@pytest.fixture
def held(worker):
    """A conversation run with Ana in the room that wrote a person note about her and a channel note."""
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
        channel, Inbound("$1", ANA, "Ana", datetime(2026, 11, 30, tzinfo=UTC), "I moved house last week.")
    )
    claimed, _ = run_claim(run.pk)
    run_input_assemble(claimed, conversation_of(claimed))
    run_set_status(run.pk, "running")
    run_set_status(run.pk, "succeeded", answer="Noted.", exit_code=0)
    person = note_write(worker, "person", FACT, channel="ops", person=ANA, run=run, participants=[ANA])
    channel_note = note_write(worker, "channel", OTHER, channel="ops", run=run)
    return {"run": run, "person": person, "channel": channel_note, "channel_obj": channel}


def _records(kind: str) -> list[dict]:
    return [json.loads(r.body)["data"] for r in AuditRecord.objects.filter(kind=kind).order_by("seq")]


def test_the_list_filters_by_person_channel_worker_and_run_and_shows_retention(
    client, admin_user, held, worker
):
    client.force_login(admin_user)
    everything = client.get("/memory/").content.decode()
    assert FACT.replace("'", "&#x27;") in everything and OTHER in everything
    assert "180 days" in everything and "365 days" in everything and "until forgotten" in everything
    by_person = client.get("/memory/", {"person": ANA}).content.decode()
    assert (
        f'id="note-{held["person"].pk}"' in by_person and f'id="note-{held["channel"].pk}"' not in by_person
    )
    by_channel = client.get("/memory/", {"channel": "ops"}).content.decode()
    assert f'id="note-{held["person"].pk}"' in by_channel and f'id="note-{held["channel"].pk}"' in by_channel
    assert 'id="note-' not in client.get("/memory/", {"worker": "someone-else"}).content.decode()
    by_run = client.get("/memory/", {"run": held["run"].pk}).content.decode()
    assert f'id="note-{held["channel"].pk}"' in by_run and "forget every one" in by_run
    bad = client.get("/memory/", {"run": "forty-one"})
    assert bad.status_code == 400 and "A run is its number" in bad.content.decode()


def test_everything_about_a_person_lists_notes_runs_and_messages(client, admin_user, held):
    client.force_login(admin_user)
    html = client.get(f"/memory/person/{ANA}/").content.decode()
    assert f'id="note-{held["person"].pk}"' in html and f'id="note-{held["channel"].pk}"' not in html
    assert f"/runs/{held['run'].pk}/" in html and "I moved house last week." in html
    assert "Forget everything about" in html and 'id="retention"' in html


@pytest.mark.parametrize("role", ["approver", "auditor", "nobody"])
def test_no_one_but_an_admin_reads_or_changes_memory(client, request, role, held):
    client.force_login(request.getfixturevalue(role))
    note, run = held["person"], held["run"]
    for path in (
        "/memory/",
        f"/memory/person/{ANA}/",
        f"/memory/notes/{note.pk}/correct/",
        f"/memory/notes/{note.pk}/forget/",
        f"/memory/person/{ANA}/forget/",
        f"/runs/{run.pk}/repair/forget-notes/",
    ):
        assert client.get(path).status_code == 403, path
    for path, data in (
        (f"/memory/notes/{note.pk}/correct/", {"text": "changed"}),
        (f"/memory/notes/{note.pk}/forget/", {}),
        (f"/memory/person/{ANA}/forget/", {}),
        (f"/runs/{run.pk}/repair/forget-notes/", {}),
        (f"/runs/{run.pk}/repair/requeue/", {}),
    ):
        assert client.post(path, data).status_code == 403, path
    note.refresh_from_db()
    assert note.text == FACT and not note.forgotten_at and not _records("repair")
    assert run.requeues.count() == 0
    if role != "nobody":
        timeline = client.get(f"/runs/{run.pk}/").content.decode()
        assert 'id="requeue"' not in timeline and "forget every one" not in timeline
        assert 'href="/memory/"' not in timeline  # no Memory link in the navigation either


def test_a_post_without_the_csrf_token_changes_nothing(admin_user, held):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin_user)
    note = held["person"]
    assert strict.post(f"/memory/notes/{note.pk}/forget/", {}).status_code == 403
    assert strict.post(f"/memory/notes/{note.pk}/correct/", {"text": "x"}).status_code == 403
    assert strict.post(f"/runs/{held['run'].pk}/repair/requeue/", {}).status_code == 403
    note.refresh_from_db()
    assert note.text == FACT and not note.forgotten_at and held["run"].requeues.count() == 0


def test_correcting_on_the_web_writes_the_audit_the_command_does(client, admin_user, held, monkeypatch):
    client.force_login(admin_user)
    web_note, cli_note = held["person"], held["channel"]
    page = client.get(f"/memory/notes/{web_note.pk}/correct/?back=person").content.decode()
    assert "csrfmiddlewaretoken" in page and "Harbour Lane" in page
    for bad, message in (("   ", "A note has text"), ("x" * 5000, "at most")):
        refused = client.post(f"/memory/notes/{web_note.pk}/correct/", {"text": bad})
        assert refused.status_code == 400 and message in refused.content.decode()
        assert "nothing was changed" in refused.content.decode()
    web_note.refresh_from_db()
    assert web_note.text == FACT
    done = client.post(
        f"/memory/notes/{web_note.pk}/correct/", {"text": "Ana lives by the harbour.", "back": "person"}
    )
    assert done.status_code == 302 and done.url == f"/memory/person/{ANA}/"
    monkeypatch.setattr("sys.stdin", io.StringIO("The ops room meets on Tuesdays."))
    call_command("memory", "correct", str(cli_note.pk), "--user", admin_user.username, stdout=io.StringIO())
    web, cli = _records("memory")[-2:]
    assert web.keys() == cli.keys() and web["action"] == cli["action"] == "corrected"
    assert web["by"] == cli["by"] == admin_user.username and web["previous_sha256"] != web["text_sha256"]
    assert "Harbour" not in "".join(r.body for r in AuditRecord.objects.all())
    web_note.refresh_from_db()
    assert web_note.text == "Ana lives by the harbour." and web_note.corrected_by == admin_user.username


def test_forgetting_one_note_and_everything_about_a_person(client, admin_user, held, worker):
    client.force_login(admin_user)
    note = held["person"]
    second = note_write(worker, "person", "Ana is allergic to cats.", channel="ops", person=ANA)
    confirm = client.get(f"/memory/notes/{note.pk}/forget/").content.decode()
    assert "cannot be undone" in confirm and "csrfmiddlewaretoken" in confirm
    long = client.post(f"/memory/notes/{note.pk}/forget/", {"reason": "r" * 301})
    assert long.status_code == 400 and "at most 300" in long.content.decode()
    note.refresh_from_db()
    assert note.text == FACT
    assert client.post(f"/memory/notes/{note.pk}/forget/", {"reason": "her request"}).status_code == 302
    note.refresh_from_db()
    assert (
        note.text == ""
        and note.forgotten_by == admin_user.username
        and note.forgotten_reason == "her request"
    )
    assert client.post(f"/memory/person/{ANA}/forget/", {}).status_code == 302
    second.refresh_from_db()
    assert second.text == "" and second.forgotten_at
    forgotten = [r for r in _records("memory") if r["action"] == "forgotten"]
    assert {r["note"] for r in forgotten} == {note.pk, second.pk}
    after = client.get(f"/memory/person/{ANA}/forget/").content.decode()
    assert 'id="nothing-to-forget"' in after
    for page in (
        "/memory/",
        f"/memory/person/{ANA}/",
        f"/runs/{held['run'].pk}/",
        "/audit/",
        "/audit/export.csv",
        "/approvals/",
    ):
        response = client.get(page)
        html = (b"".join(response.streaming_content) if response.streaming else response.content).decode()
        assert response.status_code == 200 and "Harbour Lane" not in html and "allergic" not in html, page
    assert verify_sequential().ok


def test_a_forgotten_note_is_not_corrected(client, admin_user, held):
    client.force_login(admin_user)
    note = held["person"]
    client.post(f"/memory/notes/{note.pk}/forget/", {})
    refused = client.post(f"/memory/notes/{note.pk}/correct/", {"text": "back again"})
    assert refused.status_code == 400 and "was forgotten" in refused.content.decode()
    note.refresh_from_db()
    assert note.text == "" and Note.objects.filter(text="back again").count() == 0
