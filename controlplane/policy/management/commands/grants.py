"""`python manage.py grants check|import|export DIR` (docs/grants.md)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from controlplane.core.errors import RosterError
from controlplane.policy import grantfiles


class Command(BaseCommand):
    help = "Check, import or export grants as TOML files (one grant per file, id = file stem)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("check", help="validate every file; exit 1 naming file and field of each error") \
            .add_argument("directory", type=Path)
        imp = sub.add_parser("import", help="apply every file in one transaction, or nothing")
        imp.add_argument("directory", type=Path)
        imp.add_argument("--prune", action="store_true", help="delete grants that have no file")
        sub.add_parser("export", help="write one file per grant").add_argument("directory", type=Path)

    def handle(self, *args, action, directory, **options):
        if action == "check":
            loaded = grantfiles.load_dir(directory)
            if loaded.errors:
                raise CommandError(self._errors(loaded.errors), returncode=1)
            self.stdout.write(f"{len(loaded.specs)} grant file(s) OK")
        elif action == "import":
            try:
                summary = grantfiles.import_dir(directory, prune=options["prune"], actor="cli")
            except grantfiles.GrantFilesInvalid as exc:
                raise CommandError("nothing imported:\n" + self._errors(exc.errors), returncode=1) from None
            for key, slugs in summary.items():
                self.stdout.write(f"{key}: {len(slugs)}" + (f" ({', '.join(slugs)})" if slugs else ""))
        else:
            try:
                written = grantfiles.export_dir(directory)
            except RosterError as exc:
                raise CommandError(str(exc), returncode=1) from None
            self.stdout.write(f"wrote {len(written)} grant file(s) to {directory}")

    @staticmethod
    def _errors(errors) -> str:
        return "\n".join(str(e) for e in errors)
