"""Recall: which notes a run is given (P3: scoped at recall). A worker's own notes reach each of its runs; a
channel's only runs in that channel; a person's only runs in that channel where that person is in the room.
Forgotten notes reach nobody."""

from __future__ import annotations

from django.db.models import Q

from controlplane.conversations.models import Message
from controlplane.fleet.models import Run
from controlplane.memory.models import Note


def notes_in_scope(worker_id: int, channel: str | None, people: list[str]) -> list[Note]:
    scope = Q(scope=Note.Scope.WORKER)
    if channel:
        scope |= Q(scope=Note.Scope.CHANNEL, channel=channel)
        if people:
            scope |= Q(scope=Note.Scope.PERSON, channel=channel, person__in=people)
    return list(
        Note.objects.filter(worker_id=worker_id, forgotten_at__isnull=True)
        .filter(scope)
        .select_related("worker")
        .order_by("created_at", "id")
    )


def recalled(notes: list[Note]) -> list[dict]:
    """The run input's `notes`: each framed as content with where it came from (docs/architecture.md)."""
    return [{"id": n.pk, "scope": n.scope_label, "text": n.text, "provenance": n.provenance} for n in notes]


def notes_about_person(person: str) -> list[Note]:
    """Everything held about one person, for an admin acting on their request (forgotten ones included,
    without text, so the admin sees what was erased and when)."""
    return list(Note.objects.filter(person=person).select_related("worker").order_by("created_at", "id"))


def notes_listed(*, person: str = "", channel: str = "", worker: str = "", run: int | None = None):
    """The governance list (web and `memory list`): every note, forgotten ones too, oldest first."""
    notes = Note.objects.select_related("worker", "written_by_run").order_by("created_at", "id")
    if person:
        notes = notes.filter(person=person)
    if channel:
        notes = notes.filter(channel=channel)
    if worker:
        notes = notes.filter(worker__name=worker)
    if run is not None:
        notes = notes.filter(written_by_run_id=run)
    return notes


def subject_access(person: str, limit: int = 500) -> dict:
    """Everything Roster holds about one person, for an admin answering their request: the notes about
    them, the runs they were in the room of, and the messages they sent in conversations (the messages are
    the conversation's record, docs/conversations.md; forgetting a person forgets their notes)."""
    # The JSON text narrows (SQLite has no JSON containment); the ids are then compared exactly.
    candidates = (
        Run.objects.filter(participants__icontains=person).select_related("worker").order_by("-id")[:limit]
    )
    runs = [
        r for r in candidates if any(isinstance(p, dict) and p.get("id") == person for p in r.participants)
    ]
    messages = (
        Message.objects.filter(speaker_id=person, direction=Message.Direction.INBOUND)
        .select_related("channel", "run")
        .order_by("-id")[:limit]
    )
    return {"notes": notes_about_person(person), "runs": runs, "messages": list(messages)}
