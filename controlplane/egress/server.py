"""The decision API's own process: only /api/gateway/ (what the gateway calls), on uvicorn with uvloop
and httptools. The web server (daphne: pages, admin, websockets) costs about twice the CPU per request
under load and shares its process with page traffic; decisions are on every egress request's path, so
they get a lean server of their own. `python -m controlplane.decision_server --port 8002`; with
`--metrics-port 8003` the process also serves its Prometheus metrics there (controlplane.metrics.listener)."""

from __future__ import annotations

import argparse
import os


def set_process_defaults() -> None:
    """The environment the decision API's process reads its settings from, unless told otherwise."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    os.environ.setdefault("ROSTER_DB_PREPARED_STATEMENTS", "1")  # PostgreSQL only; see settings.py


def main(argv: list[str] | None = None) -> None:
    set_process_defaults()
    import django

    django.setup(set_prefix=False)
    import uvicorn
    from django.conf import settings

    from controlplane.egress.asgi import gateway_only

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default=settings.ROSTER_DECISION_API_HOST)
    parser.add_argument("--port", type=int, default=settings.ROSTER_DECISION_API_PORT)
    parser.add_argument("--metrics-host", default=settings.ROSTER_METRICS_HOST,
                        help="address of the metrics listener (docs/operations.md, Metrics)")
    parser.add_argument("--metrics-port", type=int, default=settings.ROSTER_METRICS_PORT,
                        help="port of the metrics listener; 0: none")
    args = parser.parse_args(argv)
    if args.metrics_port:
        from controlplane.metrics import listener

        listener.start(args.metrics_host, args.metrics_port)
    uvicorn.run(gateway_only(), host=args.host, port=args.port, loop="uvloop", http="httptools",
                lifespan="on", access_log=False, server_header=False, log_level="warning",
                timeout_keep_alive=settings.ROSTER_DECISION_API_KEEPALIVE_SECONDS)


if __name__ == "__main__":
    main()
