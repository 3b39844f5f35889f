"""`python manage.py destinations list|check|import|export` (docs/proposals.md)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand

from controlplane.proposals.models import Destination
from controlplane.proposals.services import DESTINATION_FILES


class Command(BaseCommand):
    help = "List, check, import or export destinations as TOML files (one per file, name = file stem)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="one line per destination (never a secret value)")
        sub.add_parser(
            "check", help="validate every file; exit 1 naming file and field of each error"
        ).add_argument("directory", type=Path)
        imp = sub.add_parser("import", help="apply every file in one transaction, or nothing")
        imp.add_argument("directory", type=Path)
        imp.add_argument("--prune", action="store_true", help="delete destinations that have no file")
        sub.add_parser("export", help="write one file per destination").add_argument("directory", type=Path)

    def handle(self, *args, action, directory=None, **options):
        if action == "list":
            for dest in Destination.objects.select_related("secret"):
                where = dest.url or f"{dest.smtp_host}:{dest.smtp_port}"
                self.stdout.write(
                    f"{dest.name}\t{dest.kind}\t{'enabled' if dest.enabled else 'disabled'}"
                    f"\t{where}\tsecret={dest.secret.name if dest.secret_id else '-'}"
                )
        else:
            lines = DESTINATION_FILES.command(action, directory, prune=options.get("prune", False))
            self.stdout.write("\n".join(lines))
