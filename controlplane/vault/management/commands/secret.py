"""`python manage.py secret set NAME [--kind K]` reads the value from stdin and never echoes it;
`secret list` shows names, kinds and sentinels; `secret rotate-key` re-encrypts every secret under a new
vault key (controlplane/vault/rotation.py)."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from controlplane.core.errors import RosterError
from controlplane.vault import rotation, services
from controlplane.vault.models import Secret


class Command(BaseCommand):
    help = "Manage vault secrets. Values are read from stdin and never printed."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        set_ = sub.add_parser("set", help="store a secret; the value is read from stdin")
        set_.add_argument("name")
        set_.add_argument("--kind", default="generic", choices=Secret.Kind.values)
        sub.add_parser("list", help="names, kinds and sentinels (never values)")
        sub.add_parser("rotate-key", help="re-encrypt every secret under a new vault key (or finish a "
                                          "rotation that was stopped)")

    def handle(self, *args, **options):
        if options["action"] == "list":
            for s in Secret.objects.all():
                self.stdout.write(f"{s.name}\t{s.kind}\t{s.sentinel}")
            return
        if options["action"] == "rotate-key":
            return self._rotate()
        value = sys.stdin.read()
        # One trailing newline is how `echo` and most pipes end a value; it is never part of it.
        if value.endswith("\r\n"):
            value = value[:-2]
        elif value.endswith("\n"):
            value = value[:-1]
        if not value:
            raise CommandError("refusing an empty secret value; pipe the value on stdin")
        try:
            secret = services.secret_set(options["name"], value, options["kind"], via="cli")
        except RosterError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"stored secret {secret.name} ({secret.kind}); sentinel {secret.sentinel}")

    def _rotate(self) -> None:
        try:
            result = rotation.rotate_key(by="cli")
        except RosterError as exc:
            raise CommandError(str(exc)) from None
        started = "finished the rotation in progress" if result.resumed else "rotated the vault key"
        retired = ", ".join(result.retired_key_ids) or "none"
        self.stdout.write(f"{started}: {result.reencrypted} secret(s) re-encrypted under key "
                          f"{result.new_key_id}; retired key(s) {retired}")
