"""Governance of the worker's notes (docs/memory.md): bad notes are refused with nothing stored; forgetting
erases the text from the note and the proposal that carried it and leaves only its hash on the record (DB,
audit, exports); correcting keeps both hashes; a person's notes are listed and forgotten together; a run's
notes are forgotten as its repair; retention forgets by scope; the chain verifies after all of it."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.utils import timezone

from controlplane.audit.export import csv_rows, jsonl_lines
from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_sequential
from controlplane.core.roles import ADMINS, ensure_roles
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create
from controlplane.memory.models import Note
from controlplane.memory.selectors import notes_about_person
from controlplane.memory.services import (
    NoteInvalid,
    note_correct,
    note_forget,
    note_write,
    notes_forget_person,
    notes_forget_run,
    notes_purge_expired,
)

SECRET_FACT = "Ana's new flat is at 12 Harbour Lane."


def _everything_on_record() -> str:
    records = AuditRecord.objects.order_by("seq")
    return "".join(r.body for r in records) + "".join(csv_rows(records)) + "".join(jsonl_lines(records))


@pytest.mark.parametrize(
    "scope,fields,message",
    [
        ("everyone", {}, "scope must be one of"),
        ("person", {"channel": "ops"}, "names the person"),
        ("person", {"person": "@ana:x"}, "served none"),
        ("channel", {}, "served none"),
        ("worker", {"channel": "ops"}, "names no channel"),
        ("channel", {"channel": "ops", "person": "@ana:x"}, "only a person note"),
    ],
)
def test_a_bad_note_is_refused_and_nothing_is_stored(worker, scope, fields, message):
    before = AuditRecord.objects.count()
    with pytest.raises(NoteInvalid, match=message):
        note_write(worker, scope, "text", **fields)
    assert not Note.objects.exists() and AuditRecord.objects.count() == before


@pytest.mark.parametrize("text", ["", "   ", "x" * 2001])
def test_empty_or_oversize_text_is_refused(worker, text):
    with pytest.raises(NoteInvalid):
        note_write(worker, "worker", text)
    assert not Note.objects.exists()


def test_forgotten_text_is_nowhere_on_record_and_the_chain_verifies(worker):
    note = note_write(worker, "person", SECRET_FACT, channel="ops", person="@ana:x")
    assert SECRET_FACT not in _everything_on_record() and note.text_sha256 in _everything_on_record()
    note_forget(note.pk, by="admin", reason="Ana asked")
    note.refresh_from_db()
    assert note.text == "" and note.forgotten_by == "admin" and note.forgotten_at is not None
    assert SECRET_FACT not in _everything_on_record()
    actions = [r.body for r in AuditRecord.objects.filter(kind="memory").order_by("seq")]
    assert ['"written"' in actions[0], '"forgotten"' in actions[1]] == [True, True]
    # Forgetting twice changes nothing and records nothing more.
    note_forget(note.pk, by="admin")
    assert AuditRecord.objects.filter(kind="memory").count() == 2
    assert verify_sequential().ok
    with pytest.raises(NoteInvalid, match="forgotten"):
        note_correct(note.pk, "something else", by="admin")


def test_a_correction_replaces_the_text_and_keeps_both_hashes(worker):
    note = note_write(worker, "worker", "Deploys at 13:00.")
    old = note.text_sha256
    corrected = note_correct(note.pk, "Deploys at 14:00.", by="admin")
    assert corrected.text == "Deploys at 14:00." and corrected.text_sha256 != old
    record = AuditRecord.objects.filter(kind="memory").order_by("-seq").first().body
    assert old in record and corrected.text_sha256 in record and "14:00" not in record


def test_everything_about_a_person_is_listed_and_forgotten_together(worker):
    note_write(worker, "person", "Ana prefers mail.", channel="ops", person="@ana:x")
    note_write(worker, "person", "Ana is on call.", channel="sales", person="@ana:x")
    kept = note_write(worker, "person", "Bob is new.", channel="ops", person="@bob:x")
    assert [n.text for n in notes_about_person("@ana:x")] == ["Ana prefers mail.", "Ana is on call."]
    assert notes_forget_person("@ana:x", by="admin", reason="erasure request") == 2
    assert [n.text for n in notes_about_person("@ana:x")] == ["", ""]
    kept.refresh_from_db()
    assert kept.text == "Bob is new."


def test_a_runs_notes_are_forgotten_as_its_repair(worker):
    run, _ = run_create(worker, command=["true"], task="t")
    note_write(worker, "worker", "From the bad run.", run=run)
    other = note_write(worker, "worker", "From elsewhere.")
    assert notes_forget_run(run.pk, by="admin") == 1
    forgotten = Note.objects.get(written_by_run=run)
    assert forgotten.text == "" and forgotten.forgotten_reason == f"repair of run {run.pk}"
    other.refresh_from_db()
    assert other.text == "From elsewhere."
    repair = AuditRecord.objects.get(kind="repair")
    assert repair.run_id_ref == run.pk and f'"repairs":{run.pk}' in repair.body.replace(" ", "")
    assert f'"notes":[{forgotten.pk}]' in repair.body.replace(" ", "")
    with pytest.raises(Run.DoesNotExist):
        notes_forget_run(999999, by="admin")


def test_retention_forgets_by_scope(worker, settings):
    settings.ROSTER_MEMORY_RETENTION_DAYS_PERSON = 30
    settings.ROSTER_MEMORY_RETENTION_DAYS_WORKER = 0
    old_person = note_write(worker, "person", "old", channel="ops", person="@ana:x")
    new_person = note_write(worker, "person", "new", channel="ops", person="@ana:x")
    old_worker = note_write(worker, "worker", "kept forever")
    long_ago = timezone.now() - timedelta(days=31)
    Note.objects.filter(pk__in=[old_person.pk, old_worker.pk]).update(created_at=long_ago)
    assert notes_purge_expired() == 1
    texts = {n.pk: (n.text, n.forgotten_by) for n in Note.objects.all()}
    assert texts == {
        old_person.pk: ("", "retention"),
        new_person.pk: ("new", ""),
        old_worker.pk: ("kept forever", ""),
    }


def test_the_memory_command_lists_corrects_and_forgets_for_admins_only(worker, monkeypatch):
    note = note_write(worker, "person", "Ana prefers mail.", channel="ops", person="@ana:x")
    User.objects.create_user("viewer", password="pw-viewer-12345")
    root = User.objects.create_user("root", password="pw-root-123456")
    ensure_roles()
    root.groups.add(Group.objects.get(name=ADMINS))
    # Staff without the Admins group (an approver with admin-site access) is not an admin here.
    User.objects.create_user("staff-approver", password="pw-staff-12345", is_staff=True)
    out = io.StringIO()
    call_command("memory", "list", "--person", "@ana:x", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("ID\tWORKER\tSCOPE") and "Ana prefers mail." in lines[1]
    with pytest.raises(CommandError, match="not an admin"):
        call_command("memory", "forget", str(note.pk), "--user", "viewer")
    with pytest.raises(CommandError, match="staff-approver is not an admin"):
        call_command("memory", "forget", str(note.pk), "--user", "staff-approver")
    with pytest.raises(CommandError, match="no active user"):
        call_command("memory", "forget", str(note.pk), "--user", "nobody")
    with pytest.raises(CommandError, match="no note 999"):
        call_command("memory", "forget", "999", "--user", "root")
    monkeypatch.setattr("sys.stdin", io.StringIO("Ana prefers chat now."))
    call_command("memory", "correct", str(note.pk), "--user", "root", stdout=io.StringIO())
    note.refresh_from_db()
    assert note.text == "Ana prefers chat now." and note.corrected_by == "root"
    call_command("memory", "forget-person", "@ana:x", "--user", "root", "--reason", "asked", stdout=out)
    note.refresh_from_db()
    assert note.text == "" and note.forgotten_by == "root"
