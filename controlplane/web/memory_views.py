"""Memory governance pages, for an admin acting on a subject's request (docs/memory.md): the notes (filtered
by person, channel, worker or run), everything held about one person, correcting a note, forgetting one or
everything about a person. Thin: each change is the service the `memory` command calls, so the audit is
the same; bad input is refused beside the field with nothing changed. Admins only (approvers and auditors
get the 403 page): notes hold what the worker learned about people."""

from __future__ import annotations

import functools
from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from controlplane.core.roles import is_admin
from controlplane.memory.models import Note
from controlplane.memory.selectors import notes_listed, subject_access
from controlplane.memory.services import (
    NoteInvalid,
    note_correct,
    note_forget,
    notes_forget_person,
    retention_days,
)
from controlplane.web.security import hardened

MAX_REASON = 300
FILTERS = ("person", "channel", "worker", "run")


def admin_only(view):
    """Signed in, and an admin (controlplane.core.roles.is_admin, the `memory` command's test too)."""

    @functools.wraps(view)
    @login_required
    def wrapper(request, *args, **kwargs):
        if not is_admin(request.user):
            raise PermissionDenied("only admins govern memory and repair runs")
        return view(request, *args, **kwargs)

    return wrapper


def retention_rows() -> list[dict]:
    return [
        {"scope": scope, "label": label, "days": retention_days(scope)} for scope, label in Note.Scope.choices
    ]


def with_expiry(notes) -> list[dict]:
    """Each note with the day retention forgets it (None: its scope keeps notes until forgotten)."""
    days = {row["scope"]: row["days"] for row in retention_rows()}
    return [
        {
            "note": n,
            "expires": n.created_at + timedelta(days=days[n.scope])
            if days[n.scope] > 0 and not n.forgotten_at
            else None,
        }
        for n in notes
    ]


def _reason(request: HttpRequest) -> tuple[str, str]:
    reason = request.POST.get("reason", "").strip()
    return reason, (f"A reason is at most {MAX_REASON} characters." if len(reason) > MAX_REASON else "")


@require_GET
@hardened
@admin_only
def memory_list(request: HttpRequest) -> HttpResponse:
    filters = {name: request.GET.get(name, "").strip() for name in FILTERS}
    errors = {}
    run = None
    if filters["run"]:
        try:
            run = int(filters["run"])
            if run <= 0:
                raise ValueError
        except ValueError:
            errors["run"] = "A run is its number, e.g. 41."
    notes = (
        []
        if errors
        else with_expiry(
            notes_listed(
                person=filters["person"], channel=filters["channel"], worker=filters["worker"], run=run
            )
        )
    )
    return render(
        request,
        "web/memory_list.html",
        {
            "filters": filters,
            "errors": errors,
            "rows": notes,
            "retention": retention_rows(),
            "filtered": any(filters.values()),
        },
        status=400 if errors else 200,
    )


@require_GET
@hardened
@admin_only
def memory_person(request: HttpRequest, person: str) -> HttpResponse:
    held = subject_access(person)
    return render(
        request,
        "web/memory_person.html",
        {
            "person": person,
            "rows": with_expiry(held["notes"]),
            "runs": held["runs"],
            "chat_messages": held["messages"],
            "retention": retention_rows(),
            "held_count": sum(1 for n in held["notes"] if not n.forgotten_at),
        },
    )


@require_http_methods(["GET", "POST"])
@hardened
@admin_only
def note_correct_view(request: HttpRequest, note_id: int) -> HttpResponse:
    note = get_object_or_404(Note.objects.select_related("worker"), pk=note_id)
    error, text = "", note.text
    if note.forgotten_at:
        error = f"Note {note.pk} was forgotten; there is nothing to correct."
    elif request.method == "POST":
        text = request.POST.get("text", "")
        try:
            note_correct(note.pk, text, by=request.user.get_username())
        except NoteInvalid as exc:
            error = f"{str(exc)[:1].upper()}{str(exc)[1:]}; nothing was changed."
        else:
            messages.success(request, f"Note {note.pk} corrected (both hashes are on the record).")
            return redirect(_back(request, note))
    return render(
        request,
        "web/memory_correct.html",
        {"note": note, "text": text, "error": error, "back": _back(request, note), "via": _via(request)},
        status=400 if error else 200,
    )


def _via(request: HttpRequest) -> str:
    via = request.POST.get("back") or request.GET.get("back") or ""
    return via if via in ("run", "person") else ""


def _back(request: HttpRequest, note: Note) -> str:
    """Back to the list the admin came from: the person's view, the run's notes, or all notes."""
    via = _via(request)
    if via == "run" and note.written_by_run_id:
        return reverse("web:memory") + f"?run={note.written_by_run_id}"
    if via == "person" and note.person:
        return reverse("web:memory-person", args=[note.person])
    return reverse("web:memory")


@require_http_methods(["GET", "POST"])
@hardened
@admin_only
def note_forget_view(request: HttpRequest, note_id: int) -> HttpResponse:
    note = get_object_or_404(Note.objects.select_related("worker"), pk=note_id)
    error = ""
    if request.method == "POST":
        reason, error = _reason(request)
        if not error:
            note_forget(note.pk, by=request.user.get_username(), reason=reason)
            messages.success(
                request, f"Note {note.pk} forgotten: its text is erased; the record keeps its hash."
            )
            return redirect(_back(request, note))
    return render(
        request,
        "web/memory_confirm.html",
        {
            "title": f"Forget note {note.pk}",
            "rows": with_expiry([note]),
            "error": error,
            "what": f"note {note.pk} ({note.scope_label})",
            "button": "Forget this note",
            "back": _back(request, note),
            "via": _via(request),
            "already": bool(note.forgotten_at),
        },
        status=400 if error else 200,
    )


@require_http_methods(["GET", "POST"])
@hardened
@admin_only
def person_forget_view(request: HttpRequest, person: str) -> HttpResponse:
    held = notes_listed(person=person).filter(forgotten_at__isnull=True)
    error = ""
    if request.method == "POST":
        reason, error = _reason(request)
        if not error:
            count = notes_forget_person(person, by=request.user.get_username(), reason=reason)
            messages.success(request, f"{count} note(s) about {person} forgotten.")
            return redirect("web:memory-person", person=person)
    return render(
        request,
        "web/memory_confirm.html",
        {
            "title": f"Forget everything held about {person}",
            "rows": with_expiry(held),
            "error": error,
            "what": f"every note about {person} ({len(held)} held)",
            "button": f"Forget all {len(held)} notes",
            "back": reverse("web:memory-person", args=[person]),
            "via": "person",
            "already": not held,
            "person_scope": True,
        },
        status=400 if error else 200,
    )
