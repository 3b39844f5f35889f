"""The metrics of a decision API served by several processes (controlplane.egress.server, --processes N):
one listener, in the supervising process, for all of them. Each worker counts its decisions and chain
appends into files of its own in one directory (prometheus_client's multiprocess mode, chosen by
PROMETHEUS_MULTIPROC_DIR, which the workers inherit); a scrape adds them up. The per-process series
(roster_decision_process_decisions, by pid) shows how the decisions spread over the workers.

The directory is made fresh for each start and removed at exit, so no count of an earlier run is ever
added in; a worker that died and was started again keeps its counts there (counters only ever rise)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

from prometheus_client import multiprocess
from prometheus_client.registry import CollectorRegistry

ENV = "PROMETHEUS_MULTIPROC_DIR"


@contextlib.contextmanager
def directory() -> Iterator[str]:
    """A fresh directory for the workers' counts, named in the environment they are started with."""
    path = tempfile.mkdtemp(prefix="roster-decision-metrics-")
    before = os.environ.get(ENV)
    os.environ[ENV] = path
    try:
        yield path
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before
        shutil.rmtree(path, ignore_errors=True)


def registry() -> CollectorRegistry:
    """The registry the supervising process's listener serves: every worker's counts, summed (each
    process's own series kept apart by its label), and the scrape-time state (controlplane.metrics.state),
    which the listener registers."""
    shared = CollectorRegistry()
    multiprocess.MultiProcessCollector(shared, path=os.environ[ENV])
    return shared
