"""`knowledge log WORKER [--path P] [--limit N]`, `knowledge show WORKER PATH [--commit C]`,
`knowledge revert-run RUN --user ADMIN [--reason T]`: reading a worker's world store and repairing it
(docs/knowledge.md). A revert names the run it repairs on the record (audit kind `repair`); the named
user must be an admin (controlplane.core.roles.is_admin, as on the run timeline)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from controlplane.core.roles import is_admin
from controlplane.fleet.models import Run, Worker
from controlplane.knowledge.services import RevertRefused, knowledge_log, knowledge_revert_run, knowledge_show


class Command(BaseCommand):
    help = "Read a worker's knowledge repository and revert a run's commits (docs/knowledge.md)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        log = sub.add_parser("log")
        log.add_argument("worker")
        log.add_argument("--path", default="")
        log.add_argument("--limit", type=int, default=50)
        show = sub.add_parser("show")
        show.add_argument("worker")
        show.add_argument("path")
        show.add_argument("--commit", default="")
        revert = sub.add_parser("revert-run")
        revert.add_argument("run", type=int)
        revert.add_argument("--user", required=True, help="the admin repairing the run")
        revert.add_argument("--reason", default="")

    def handle(self, *args, **options):
        try:
            if options["action"] == "log":
                for entry in knowledge_log(options["worker"], options["limit"], options["path"]):
                    self.stdout.write(f"commit {entry.commit}\ndate {entry.date}\n\n"
                                      + "".join(f"    {line}\n" for line in entry.message.splitlines()))
            elif options["action"] == "show":
                data = knowledge_show(options["worker"], options["path"], options["commit"])
                if data is None:
                    raise CommandError(f"no file {options['path']!r} in {options['worker']}'s knowledge")
                self.stdout.write(data.decode("utf-8", "replace"), ending="")
            else:
                user = get_user_model().objects.filter(username=options["user"], is_active=True).first()
                if user is None or not is_admin(user):
                    raise CommandError(f"{options['user']} is not an active admin: only admins repair runs")
                commit = knowledge_revert_run(options["run"], by=user.get_username(),
                                              reason=options["reason"])
                self.stdout.write(f"run {options['run']}'s knowledge commits reverted by commit {commit.sha}")
        except Worker.DoesNotExist as exc:
            raise CommandError(f"no worker {options.get('worker')!r}") from exc
        except Run.DoesNotExist as exc:
            raise CommandError(f"no run {options.get('run')}") from exc
        except RevertRefused as exc:
            raise CommandError(str(exc)) from exc
