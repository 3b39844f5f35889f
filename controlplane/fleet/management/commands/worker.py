"""`worker create NAME [--description D]`, `worker list`."""

from django.core.management.base import BaseCommand, CommandError

from controlplane.core.errors import RosterError
from controlplane.fleet.selectors import worker_list
from controlplane.fleet.services import worker_create


class Command(BaseCommand):
    help = "Create and list workers. A worker's identity is set by a human in the admin, not here."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a worker")
        create.add_argument("name")
        create.add_argument("--description", default="")
        sub.add_parser("list", help="list workers")

    def handle(self, *args, action, **options):
        if action == "create":
            try:
                worker = worker_create(options["name"], description=options["description"])
            except RosterError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"created worker {worker.name}")
        elif action == "list":
            for worker in worker_list():
                state = "active" if worker.active else "inactive"
                self.stdout.write(f"{worker.name}\t{state}\t{worker.description}")
