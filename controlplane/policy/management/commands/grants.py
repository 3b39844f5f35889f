"""`python manage.py grants check|import|export DIR`, `grants test WORKER METHOD URL` (docs/grants.md)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from controlplane.core.taint import DataClass
from controlplane.fleet.models import Worker
from controlplane.policy import dry_run, trial
from controlplane.policy.grant_services import GRANT_FILES


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
        dry = sub.add_parser("dry-run", help="replay recorded decisions against the grant files in DIR "
                                             "(the whole draft grant set) and list what would change")
        dry.add_argument("directory", type=Path)
        dry.add_argument("--days", type=int, default=7, help="how far back to replay (default 7)")
        trial = sub.add_parser("test", help="which grant decides a request, and why (changes nothing)")
        trial.add_argument("worker")
        trial.add_argument("method")
        trial.add_argument("url")
        trial.add_argument("--mcp-tool", default=None, help="the MCP tool the request calls")
        trial.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                           help="a header the request carries (repeatable; judged by header conditions)")
        trial.add_argument("--body-size", type=int, default=0, metavar="N",
                           help="the request body's size in bytes (default 0: no body)")
        trial.add_argument("--taint", default="private", choices=[c.label for c in DataClass],
                           help="the run's taint to judge at (default: a fresh run's)")

    def handle(self, *args, action, directory=None, **options):
        if action == "test":
            self._test(**options)
        elif action == "dry-run":
            self._dry_run(directory, options["days"])
        else:
            lines = GRANT_FILES.command(action, directory, prune=options.get("prune", False))
            self.stdout.write("\n".join(lines))

    def _test(self, *, worker, method, url, mcp_tool, taint, header, body_size, **_):
        found = Worker.objects.filter(name=worker).first()
        if found is None:
            raise CommandError(f"no worker named {worker!r}", returncode=1)
        try:
            result = trial.try_request(found, method, url, mcp_tool=mcp_tool, headers=header,
                                       body_size=body_size,
                                       taint=next(c for c in DataClass if c.label == taint))
        except trial.TrialInvalid as exc:
            raise CommandError(str(exc), returncode=1) from None
        self.stdout.write("\n".join(trial.explain(result)))

    def _dry_run(self, directory: Path, days: int):
        if days < 1 or days > 3660:
            raise CommandError("--days must be from 1 to 3660", returncode=1)
        loaded = GRANT_FILES.load_dir(directory)
        if loaded.errors:
            raise CommandError("nothing replayed:\n" + self._errors(loaded.errors), returncode=1)
        report = dry_run.dry_run(dry_run.rules_from_specs(loaded.specs), days=days, actor="cli",
                                 source=f"files:{directory}")
        self.stdout.write("\n".join(report.lines()))

    @staticmethod
    def _errors(errors) -> str:
        return "\n".join(str(e) for e in errors)
