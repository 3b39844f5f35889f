"""The decision API's own process: only /api/gateway/ (what the gateway calls), on uvicorn with uvloop
and httptools. The web server (daphne: pages, admin, websockets) costs about twice the CPU per request
under load and shares its process with page traffic; decisions are on every egress request's path, so
they get a lean server of their own. `python -m controlplane.decision_server --port 8002`; with
`--metrics-port 8003` the process also serves its Prometheus metrics there (controlplane.metrics.listener).

`--processes N` (ROSTER_DECISION_PROCESSES, default one per core): uvicorn binds the port once in this
process and starts N worker processes that accept on that one socket; this process only supervises them
(a worker that dies is started again) and serves the metrics of all of them, read from the files each
worker counts into (controlplane.metrics.shared). The workers share nothing in memory: the audit chain
and the ledger are serialised by the database (docs/operations.md, "Decision API processes")."""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing
import os
import signal
import sys

# What each worker process loads (by import string: uvicorn starts its workers by spawning them afresh).
PROCESS_APP = "controlplane.egress.server:process_app"


def set_process_defaults() -> None:
    """The environment the decision API's process reads its settings from, unless told otherwise."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    os.environ.setdefault("ROSTER_DB_PREPARED_STATEMENTS", "1")  # PostgreSQL only; see settings.py


def process_app():
    """ASGI app of one worker process (uvicorn's factory): Django set up in that process, then the same
    app a single process serves."""
    set_process_defaults()
    _end_with_the_supervisor()
    import django

    django.setup(set_prefix=False)
    from controlplane.egress.asgi import gateway_only

    return gateway_only()


def _end_with_the_supervisor() -> None:
    """A worker process ends when its supervisor does, however that dies. A supervisor killed outright
    (SIGKILL, an OOM kill) cannot stop its workers, and orphaned workers would go on deciding on the port
    with nothing to restart or stop them, unseen by `make down` and by whoever starts the decision API
    again. Linux delivers SIGKILL to the worker when its parent ends (PR_SET_PDEATHSIG). The one process of
    `--processes 1` has no supervisor and is left alone."""
    parent = multiprocessing.parent_process()
    if parent is None or not sys.platform.startswith("linux"):
        return
    pr_set_pdeathsig = 1  # <linux/prctl.h>
    if ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(),
                      "prctl(PR_SET_PDEATHSIG) failed: a decision worker could outlive its supervisor")
    if os.getppid() != parent.pid:  # the supervisor ended before the request above was made
        os._exit(1)


def _arguments(argv: list[str] | None, settings) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default=settings.ROSTER_DECISION_API_HOST)
    parser.add_argument("--port", type=int, default=settings.ROSTER_DECISION_API_PORT)
    parser.add_argument("--processes", type=int, default=settings.ROSTER_DECISION_PROCESSES,
                        help="worker processes sharing the port (ROSTER_DECISION_PROCESSES); 1: one process")
    parser.add_argument("--metrics-host", default=settings.ROSTER_METRICS_HOST,
                        help="address of the metrics listener (docs/operations.md, Metrics)")
    parser.add_argument("--metrics-port", type=int, default=settings.ROSTER_METRICS_PORT,
                        help="port of the metrics listener; 0: none")
    args = parser.parse_args(argv)
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    set_process_defaults()
    import django

    django.setup(set_prefix=False)
    import uvicorn
    from django.conf import settings

    args = _arguments(argv, settings)
    common = dict(host=args.host, port=args.port, loop="uvloop", http="httptools", lifespan="on",
                  access_log=False, server_header=False, log_level="warning",
                  timeout_keep_alive=settings.ROSTER_DECISION_API_KEEPALIVE_SECONDS)
    if args.processes == 1:
        if args.metrics_port:
            from controlplane.metrics import listener

            listener.start(args.metrics_host, args.metrics_port)
        uvicorn.run(process_app(), **common)
        return
    from controlplane.metrics import listener, shared

    with shared.directory():  # before the workers start: they count into it from their first import
        if args.metrics_port:
            listener.start(args.metrics_host, args.metrics_port, shared.registry())
        uvicorn.run(PROCESS_APP, factory=True, workers=args.processes, **common)


if __name__ == "__main__":
    main()
