"""An admin in Chromium answers a subject's request (docs/memory.md): everything held about Ana (notes, the
runs she was in, her messages), a note corrected, everything about her forgotten after a confirm page, and
afterward neither the old nor the corrected text on any page; then a failed run's task requeued from its
timeline, the new run saying what it repairs. An approver is refused the memory pages. Screenshots under
test-artifacts/screenshots/memory-*.png."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import Group, User

from controlplane.conversations.models import Channel, ChatServer
from controlplane.conversations.services import Inbound
from controlplane.core.roles import ADMINS
from controlplane.dispatch.runinput import conversation_of, run_input_assemble
from controlplane.dispatch.running import run_claim
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_set_status
from controlplane.memory.models import Note
from controlplane.memory.services import note_write
from controlplane.relay.intake import message_into_work
from controlplane.vault.services import secret_set
from tests.integration.browser import harness

pytestmark = [pytest.mark.integration, pytest.mark.browser]
ANA = "@ana:roster.test"
FACT = "Ana's new flat is at 12 Harbour Lane."
CORRECTED = "Ana lives near the old lighthouse."
ALSO = "Ana is allergic to cats."


def _ended_conversation_run(worker):
    server = ChatServer.objects.create(
        name="hs",
        homeserver_url="http://127.0.0.1:1",
        bot_user_id="@bot:roster.test",
        access_token=secret_set("bot", "syt_a_b"),
    )
    channel = Channel.objects.create(
        name="ops-room", kind="matrix", worker=worker, server=server, room_id="!ops:roster.test"
    )
    _, run, _ = message_into_work(
        channel,
        Inbound(
            "$1", ANA, "Ana", datetime(2026, 11, 30, 9, tzinfo=UTC), "I moved house, please update the rota."
        ),
    )
    claimed, _ = run_claim(run.pk)
    run_input_assemble(claimed, conversation_of(claimed))
    run_set_status(run.pk, "running")
    run_set_status(run.pk, "failed", exit_code=1)
    return channel, run


def _everywhere(page, base_url: str, paths: list[str]) -> str:
    seen = []
    for path in paths:
        page.goto(base_url + path)
        seen.append(page.content())
    return "\n".join(seen)


def test_an_admin_answers_a_subjects_request_and_repairs_a_run(world, page_for, monkeypatch):
    monkeypatch.setattr("controlplane.dispatch.tasks.dispatch_run.delay", lambda run_id: None)
    admin = User.objects.create_user("dora-admin")
    admin.groups.add(Group.objects.get(name=ADMINS))
    channel, run = _ended_conversation_run(world["worker"])
    note = note_write(
        world["worker"], "person", FACT, channel="ops-room", person=ANA, run=run, participants=[ANA]
    )
    note_write(world["worker"], "person", ALSO, channel="ops-room", person=ANA, run=run, participants=[ANA])
    base = world["base_url"]

    page = page_for(admin, f"/memory/person/{ANA}/")
    assert page.locator(f"#note-{note.pk}").get_by_text(FACT).count() == 1
    assert page.locator("#person-runs").get_by_role("link", name=f"run {run.pk}").count() == 1
    assert page.locator("#person-messages").get_by_text("I moved house").count() == 1
    assert page.locator("#retention").get_by_text("180 days").count() == 1
    harness.shot(page, "memory-person")

    page.locator(f"#note-{note.pk}").get_by_role("link", name="Correct").click()
    page.fill("#note-text", "   ")
    page.click("#save-correction")
    assert "A note has text; nothing was changed." in page.locator("#correct-error").inner_text()
    harness.shot(page, "memory-correct-refused")
    page.fill("#note-text", CORRECTED)
    page.click("#save-correction")
    page.wait_for_url(f"**/memory/person/{ANA}/")
    assert page.locator(f"#note-{note.pk}").get_by_text(CORRECTED).count() == 1
    assert page.get_by_text(f"Note {note.pk} corrected").count() == 1
    harness.shot(page, "memory-corrected")

    page.click("#forget-person")
    assert page.get_by_text("This cannot be undone").count() == 1
    harness.shot(page, "memory-forget-confirm")
    page.fill("#forget-reason", "Ana's request of 2 December")
    page.click("#confirm-forget")
    page.wait_for_url(f"**/memory/person/{ANA}/")
    assert page.get_by_text(f"2 note(s) about {ANA} forgotten.").count() == 1
    assert page.locator(".note-forgotten").count() == 2 and page.locator(".note-held").count() == 0
    harness.shot(page, "memory-forgotten")
    assert all(n.text == "" for n in Note.objects.all())

    pages = [
        "/",
        "/memory/",
        f"/memory/person/{ANA}/",
        f"/memory/?run={run.pk}",
        f"/runs/{run.pk}/",
        f"/channels/{channel.pk}/",
        f"/workers/{world['worker'].pk}/",
        "/audit/",
        "/approvals/",
    ]
    html = _everywhere(page, base, pages)
    for text in (FACT, "Harbour Lane", CORRECTED, "lighthouse", ALSO, "allergic"):
        assert text not in html and text.replace("'", "&#x27;") not in html, text

    page.goto(base + f"/runs/{run.pk}/")
    harness.shot(page, "memory-run-repair-section")
    page.click("#requeue")
    new = Run.objects.get(requeue_of=run)
    page.wait_for_url(f"**/runs/{new.pk}/")
    assert page.locator("#requeue-of").inner_text().startswith(f"Requeue of run {run.pk}")
    assert page.get_by_text(f"requeue of run {run.pk} (by dora-admin)").count() == 1
    assert 'id="requeue"' not in page.content()  # the new run is queued: live runs are not requeued
    harness.shot(page, "memory-run-requeued")

    approver = page_for(world["alice"], "/memory/")
    assert approver.get_by_text("does not include this page").count() == 1
    harness.shot(approver, "memory-approver-refused")
