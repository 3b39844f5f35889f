"""`boxwatcher`: the box watcher of this box host (controlplane.dispatch.watcher), until SIGTERM or SIGINT.
One per box host; scripts/up.sh and compose start it next to the Celery worker."""

from __future__ import annotations

import logging
import signal

from django.core.management.base import BaseCommand

from controlplane.dispatch.watcher import BoxWatcher


def _admit() -> None:
    from controlplane.dispatch.tasks import admit_runs

    try:
        admit_runs.delay()
    except Exception:  # noqa: BLE001 - broker down: the reaper's periodic pass admits later
        logging.getLogger(__name__).warning("boxwatcher: could not queue an admission pass; the reaper will")


class Command(BaseCommand):
    help = "Start, follow and finish this box host's boxes (one per host)."

    def handle(self, *args, **options):
        # Each box started and finished is a line of this process's log (var/log/boxwatcher.log).
        logging.getLogger("controlplane.dispatch").setLevel(logging.INFO)
        watcher = BoxWatcher(on_slot_free=_admit)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: watcher.stop())
        self.stdout.write("boxwatcher: watching this host's boxes")
        watcher.run_forever()
        self.stdout.write("boxwatcher: stopped (the boxes keep running; the next watcher follows them)")
