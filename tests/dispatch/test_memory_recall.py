"""Recall (P3: scoped at recall): a run's input holds the worker's own notes, its channel's notes only in
that channel, and a person's notes only where that person is in the room, each framed as content with its
provenance; a forgotten note reaches no later run, and the run's input record names what was recalled."""

from __future__ import annotations

import json

from controlplane.audit.models import AuditRecord
from controlplane.dispatch.runinput import Conversation, Turn, run_input_assemble
from controlplane.fleet.services import run_create, worker_create
from controlplane.memory.services import note_forget, note_write

ANA = {"id": "@ana:example.org", "name": "Ana", "role": "member"}
BOB = {"id": "@bob:example.org", "name": "Bob", "role": "member"}


def _in(channel: str, *people) -> Conversation:
    turns = [
        Turn(speaker=p["id"], name=p["name"], role="member", time="2026-12-01T10:00:00Z", text="hello")
        for p in people
    ]
    return Conversation(channel=channel, turns=turns, participants=list(people))


def _recalled(worker, conversation=None) -> list[str]:
    run, _ = run_create(worker, command=["true"], task="Help.")
    return [n["text"] for n in run_input_assemble(run, conversation).document["notes"]]


def _notes(worker):
    by = run_create(worker, command=["true"], task="earlier")[0]
    note_write(worker, "worker", "Deploys happen at 14:00 UTC.", run=by, untrusted=False)
    note_write(worker, "channel", "ops-room meets on Mondays.", channel="ops-room", run=by, untrusted=True)
    note_write(
        worker, "person", "Ana prefers mail.", channel="ops-room", person=ANA["id"], run=by, untrusted=True
    )
    return by


def test_a_persons_note_only_where_that_person_is_in_the_room(worker, gateway_ca):
    _notes(worker)
    assert _recalled(worker) == ["Deploys happen at 14:00 UTC."]
    assert _recalled(worker, _in("ops-room", BOB)) == [
        "Deploys happen at 14:00 UTC.",
        "ops-room meets on Mondays.",
    ]
    assert _recalled(worker, _in("ops-room", ANA, BOB)) == [
        "Deploys happen at 14:00 UTC.",
        "ops-room meets on Mondays.",
        "Ana prefers mail.",
    ]
    # Ana in another channel: neither ops-room's notes nor her ops-room note.
    assert _recalled(worker, _in("sales-room", ANA)) == ["Deploys happen at 14:00 UTC."]


def test_another_workers_notes_never_reach_a_run(worker, gateway_ca):
    _notes(worker)
    other = worker_create("beta")
    assert _recalled(other, _in("ops-room", ANA)) == []


def test_notes_are_framed_as_content_with_provenance_and_named_in_the_input_record(worker, gateway_ca):
    by = _notes(worker)
    run, _ = run_create(worker, command=["true"], task="Help.")
    run_input = run_input_assemble(run, _in("ops-room", ANA))
    person = run_input.document["notes"][-1]
    assert person["scope"] == f"{ANA['id']} on ops-room"
    assert person["provenance"] == f"written by run {by.pk}, untrusted"
    assert (
        f"[note, {ANA['id']} on ops-room; written by run {by.pk}, untrusted]\n> Ana prefers mail."
        in run_input.prompt
    )
    record = AuditRecord.objects.filter(kind="run_input", run_id_ref=run.pk).get()
    assert json.loads(record.body)["data"]["notes"] == [n["id"] for n in run_input.document["notes"]]


def test_a_forgotten_note_reaches_no_later_run(worker, gateway_ca):
    _notes(worker)
    from controlplane.memory.models import Note

    note_forget(Note.objects.get(person=ANA["id"]).pk, by="admin", reason="Ana asked")
    recalled = _recalled(worker, _in("ops-room", ANA))
    assert "Ana prefers mail." not in recalled and len(recalled) == 2


def test_the_run_timeline_names_the_notes_recalled_and_written(worker, gateway_ca, client):
    from django.contrib.auth.models import User

    by = _notes(worker)
    run, _ = run_create(worker, command=["true"], task="Help.")
    recalled = run_input_assemble(run, _in("ops-room", ANA)).document["notes"]
    client.force_login(User.objects.create_superuser("root", "root@example.org", "pw-root-123456"))
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "recalled " + ", ".join(f"note {n['id']}" for n in recalled) in html
    assert "Ana prefers mail." not in html  # the timeline names notes; their text is memory's
    written = client.get(f"/runs/{by.pk}/").content.decode()
    assert f"note {recalled[-1]['id']} written (person: {ANA['id']})" in written
