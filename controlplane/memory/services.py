"""Writing, correcting and forgetting notes: every change audited in the same transaction, the text never
in the record (its SHA-256 is). Forgetting erases the text from the note and from the proposal that
carried it, so the only trace left is that a note existed and its hash (docs/memory.md)."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.audit.services import audit_append
from controlplane.core.errors import RosterError
from controlplane.fleet.models import Run, Worker
from controlplane.journal.services import erase_text
from controlplane.memory.models import Note
from controlplane.proposals.models import Proposal


class NoteInvalid(RosterError):
    """A note that cannot be written as asked (scope, size, text)."""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _clean_text(text: str) -> str:
    text = str(text).strip()
    if not text:
        raise NoteInvalid("a note has text")
    if len(text) > settings.ROSTER_MEMORY_NOTE_MAX_CHARS:
        raise NoteInvalid(f"a note is at most {settings.ROSTER_MEMORY_NOTE_MAX_CHARS} characters")
    return text


def _record(note: Note, action: str, **extra) -> None:
    audit_append("memory", {"action": action, "note": note.pk, "scope": note.scope, "channel": note.channel,
                            "person": note.person, "text_sha256": note.text_sha256, **extra},
                 worker=note.worker, run=note.written_by_run)


def note_write(worker: Worker, scope: str, text: str, *, channel: str = "", person: str = "",
               run: Run | None = None, participants=None, untrusted: bool = True,
               proposal_id=None) -> Note:
    if scope not in Note.Scope.values:
        raise NoteInvalid(f"scope must be one of {', '.join(Note.Scope.values)}")
    if scope != Note.Scope.PERSON and person:
        raise NoteInvalid("only a person note names a person")
    if scope == Note.Scope.WORKER and channel:
        raise NoteInvalid("a worker note names no channel")
    if scope != Note.Scope.WORKER and not channel:
        raise NoteInvalid(f"a {scope} note belongs to a channel: the run served none")
    if scope == Note.Scope.PERSON and not person:
        raise NoteInvalid("a person note names the person (their chat id)")
    text = _clean_text(text)
    with transaction.atomic():
        note = Note.objects.create(worker=worker, scope=scope, channel=channel, person=person, text=text,
                                   text_sha256=_sha(text), written_by_run=run,
                                   participants=list(participants or []), untrusted=untrusted,
                                   proposal_id=proposal_id)
        _record(note, "written", untrusted=untrusted, participants=note.participants,
                proposal=str(proposal_id) if proposal_id else None)
    return note


def note_correct(note_id: int, text: str, *, by: str) -> Note:
    """An admin's correction on the subject's request: the new text replaces the old (both hashes kept)."""
    text = _clean_text(text)
    with transaction.atomic():
        note = Note.objects.select_for_update().select_related("worker").get(pk=note_id)
        if note.forgotten_at:
            raise NoteInvalid(f"note {note_id} was forgotten; there is nothing to correct")
        before = note.text_sha256
        note.text, note.text_sha256 = text, _sha(text)
        note.corrected_at, note.corrected_by = timezone.now(), by
        note.save(update_fields=["text", "text_sha256", "corrected_at", "corrected_by"])
        _erase_from_proposal(note)
        _record(note, "corrected", by=by, previous_sha256=before)
    return note


def note_forget(note_id: int, *, by: str, reason: str = "") -> Note:
    """Erase a note's text everywhere Roster holds it; the audit keeps that it existed and its hash."""
    with transaction.atomic():
        note = Note.objects.select_for_update().select_related("worker").get(pk=note_id)
        if note.forgotten_at:
            return note
        # The text may have reached a model in a run's input: cut from the journal's bodies too.
        erase_text(note.text, reason=f"note {note.pk} forgotten")
        note.text = ""
        note.forgotten_at, note.forgotten_by, note.forgotten_reason = timezone.now(), by, reason[:300]
        note.save(update_fields=["text", "forgotten_at", "forgotten_by", "forgotten_reason"])
        _erase_from_proposal(note)
        _record(note, "forgotten", by=by, reason=reason[:300])
    return note


def _erase_from_proposal(note: Note) -> None:
    """The proposal that carried the note holds its first text: erased there too (its payload hash
    stays, so the proposal's own record still verifies)."""
    if note.proposal_id is None:
        return
    proposal = Proposal.objects.select_for_update().filter(pk=note.proposal_id).first()
    if proposal is not None and proposal.payload.get("text"):
        erased = "the note's text was corrected or forgotten"
        proposal.payload = {**proposal.payload, "text": "", "erased": erased}
        proposal.save(update_fields=["payload"])


def notes_forget_person(person: str, *, by: str, reason: str = "") -> int:
    """Everything held about one person (their notes on every channel of every worker), forgotten."""
    ids = list(Note.objects.filter(person=person, forgotten_at__isnull=True).values_list("pk", flat=True))
    for note_id in ids:
        note_forget(note_id, by=by, reason=reason)
    return len(ids)


def notes_forget_run(run_id: int, *, by: str, reason: str = "") -> int:
    """Repair: every note a run wrote, forgotten, and one `repair` record naming the run it repairs (with
    the notes' ids), all in one transaction."""
    with transaction.atomic():
        run = Run.objects.select_related("worker").get(pk=run_id)
        ids = list(Note.objects.filter(written_by_run_id=run_id, forgotten_at__isnull=True)
                   .values_list("pk", flat=True))
        for note_id in ids:
            note_forget(note_id, by=by, reason=reason or f"repair of run {run_id}")
        audit_append("repair", {"action": "forget_notes", "repairs": run_id, "run": run_id,
                                "worker": run.worker.name, "notes": ids, "by": by, "reason": reason[:300]},
                     run=run, worker=run.worker)
    return len(ids)


def retention_days(scope: str) -> int:
    return {Note.Scope.PERSON: settings.ROSTER_MEMORY_RETENTION_DAYS_PERSON,
            Note.Scope.CHANNEL: settings.ROSTER_MEMORY_RETENTION_DAYS_CHANNEL,
            Note.Scope.WORKER: settings.ROSTER_MEMORY_RETENTION_DAYS_WORKER}[scope]


def notes_purge_expired(now=None) -> int:
    """Notes past their scope's retention (0: kept until forgotten) are forgotten by `retention`."""
    now = now or timezone.now()
    count = 0
    for scope in Note.Scope.values:
        days = retention_days(scope)
        if days <= 0:
            continue
        due = Note.objects.filter(scope=scope, forgotten_at__isnull=True,
                                  created_at__lt=now - timedelta(days=days)).values_list("pk", flat=True)
        for note_id in list(due):
            note_forget(note_id, by="retention", reason=f"older than {days} days ({scope} notes)")
            count += 1
    return count
