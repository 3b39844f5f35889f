"""`memory list [--worker W] [--person ID] [--channel C] [--run N]`, `memory correct ID --user NAME` (new
text on stdin),
`memory forget ID --user NAME [--reason T]`, `memory forget-person ID --user NAME [--reason T]`,
`memory forget-run N --user NAME`, `memory purge`: governance of the worker's notes on a subject's request
(docs/memory.md). The named user must be an admin (controlplane.core.roles.is_admin, as on the web pages);
every change is audited by the same services the web pages call."""

from __future__ import annotations

import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from controlplane.core.roles import is_admin
from controlplane.fleet.models import Run
from controlplane.memory.models import Note
from controlplane.memory.selectors import notes_listed
from controlplane.memory.services import (
    NoteInvalid,
    note_correct,
    note_forget,
    notes_forget_person,
    notes_forget_run,
    notes_purge_expired,
)


class Command(BaseCommand):
    help = "List, correct and forget the workers' notes (docs/memory.md)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        listing = sub.add_parser("list")
        listing.add_argument("--worker")
        listing.add_argument("--person", help="a chat id: everything held about that person")
        listing.add_argument("--channel", help="a channel's name: the notes on that channel")
        listing.add_argument("--run", type=int, help="the notes a run wrote")
        for name, key in (("correct", "note"), ("forget", "note"), ("forget-person", "person"),
                          ("forget-run", "run")):
            one = sub.add_parser(name)
            one.add_argument(key, type=int if key in ("note", "run") else str)
            one.add_argument("--user", required=True, help="the admin acting on the subject's request")
            if name != "correct":
                one.add_argument("--reason", default="")
        sub.add_parser("purge")

    def handle(self, *args, **options):
        action = options["action"]
        if action == "list":
            return self._list(options)
        if action == "purge":
            self.stdout.write(f"forgotten: {notes_purge_expired()}")
            return None
        by = self._admin(options["user"])
        try:
            if action == "correct":
                text = sys.stdin.read()
                note = note_correct(options["note"], text, by=by)
                self.stdout.write(f"note {note.pk} corrected")
            elif action == "forget":
                note = note_forget(options["note"], by=by, reason=options["reason"])
                self.stdout.write(f"note {note.pk} forgotten")
            elif action == "forget-person":
                count = notes_forget_person(options["person"], by=by, reason=options["reason"])
                self.stdout.write(f"{count} note(s) about {options['person']} forgotten")
            else:
                count = notes_forget_run(options["run"], by=by, reason=options["reason"])
                self.stdout.write(f"{count} note(s) written by run {options['run']} forgotten")
        except Note.DoesNotExist as exc:
            raise CommandError(f"no note {options.get('note')}") from exc
        except Run.DoesNotExist as exc:
            raise CommandError(f"no run {options.get('run')}") from exc
        except NoteInvalid as exc:
            raise CommandError(str(exc)) from exc
        return None

    def _list(self, options) -> None:
        notes = notes_listed(person=options["person"] or "", channel=options["channel"] or "",
                             worker=options["worker"] or "", run=options["run"])
        self.stdout.write("ID\tWORKER\tSCOPE\tWRITTEN BY\tSTATE\tTEXT")
        for note in notes:
            state = f"forgotten {note.forgotten_at:%Y-%m-%d %H:%M} UTC" if note.forgotten_at else "held"
            text = note.text.replace("\n", " ")[:80] if not note.forgotten_at else "-"
            self.stdout.write(f"{note.pk}\t{note.worker.name}\t{note.scope_label}\t{note.provenance}\t{state}\t{text}")

    def _admin(self, name: str) -> str:
        user = get_user_model().objects.filter(username=name, is_active=True).first()
        if user is None:
            raise CommandError(f"no active user named {name!r}")
        if not is_admin(user):
            raise CommandError(f"{name} is not an admin: only admins correct or forget notes")
        return user.get_username()
