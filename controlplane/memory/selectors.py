"""Recall: which notes a run is given (P3: scoped at recall). A worker's own notes reach each of its runs; a
channel's only runs in that channel; a person's only runs in that channel where that person is in the room.
Forgotten notes reach nobody."""

from __future__ import annotations

from django.db.models import Q

from controlplane.memory.models import Note


def notes_in_scope(worker_id: int, channel: str | None, people: list[str]) -> list[Note]:
    scope = Q(scope=Note.Scope.WORKER)
    if channel:
        scope |= Q(scope=Note.Scope.CHANNEL, channel=channel)
        if people:
            scope |= Q(scope=Note.Scope.PERSON, channel=channel, person__in=people)
    return list(Note.objects.filter(worker_id=worker_id, forgotten_at__isnull=True).filter(scope)
                .select_related("worker").order_by("created_at", "id"))


def recalled(notes: list[Note]) -> list[dict]:
    """The run input's `notes`: each framed as content with where it came from (docs/architecture.md)."""
    return [{"id": n.pk, "scope": n.scope_label, "text": n.text, "provenance": n.provenance} for n in notes]


def notes_about_person(person: str) -> list[Note]:
    """Everything held about one person, for an admin acting on their request (forgotten ones included,
    without text, so the admin sees what was erased and when)."""
    return list(Note.objects.filter(person=person).select_related("worker").order_by("created_at", "id"))
