"""What the database and the broker hold right now, read when Prometheus scrapes (a custom collector), never
on the decision path: approvals waiting for an approver, spend against every cap, runs by state, and the
length of each Celery queue. A source that cannot be read is reported as down (roster_metrics_source_up 0)
and its other metrics are left out of that scrape; a scrape never fails because Redis or the database
does. Label values are bounded: a cap's scope ("org" or "worker:<name>"), its unit and window, a run
state, a configured queue name."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import redis
from django.conf import settings
from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from controlplane.approvals.models import Approval
from controlplane.fleet.models import Run
from controlplane.ledger.selectors import cap_statuses

log = logging.getLogger(__name__)


def _database() -> list[GaugeMetricFamily]:
    pending = GaugeMetricFamily("roster_approvals_pending", "Approvals waiting for an approver")
    pending.add_metric([], Approval.objects.filter(status=Approval.Status.PENDING).count())
    runs = GaugeMetricFamily("roster_runs", "Runs by state", labels=["state"])
    counted = dict(Run.objects.order_by().values_list("status").annotate(n=Count("id")))
    for state in Run.Status.values:
        runs.add_metric([state], counted.get(state, 0))
    spent = GaugeMetricFamily("roster_cap_spent", "Spend in the cap's current window, in the cap's unit",
                              labels=["scope", "unit", "window"])
    limit = GaugeMetricFamily("roster_cap_limit", "The cap's limit, in its unit",
                              labels=["scope", "unit", "window"])
    for cap in cap_statuses():
        labels = [cap.scope, str(cap.unit), str(cap.window)]
        spent.add_metric(labels, cap.spent)
        limit.add_metric(labels, cap.limit)
    return [pending, runs, spent, limit]


def _broker() -> list[GaugeMetricFamily]:
    timeout = settings.ROSTER_METRICS_BROKER_TIMEOUT_SECONDS
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=timeout,
                                  socket_connect_timeout=timeout)
    try:
        queues = GaugeMetricFamily("roster_celery_queue_length", "Tasks waiting in a Celery queue (the "
                                   "broker's Redis list)", labels=["queue"])
        for name in settings.ROSTER_METRICS_CELERY_QUEUES:
            queues.add_metric([name], client.llen(name))
        return [queues]
    finally:
        client.close()


class StateCollector(Collector):
    """Registered once by the metrics listener of the decision API's process."""

    def __init__(self, sources: dict[str, Callable[[], list[GaugeMetricFamily]]] | None = None) -> None:
        self._sources = sources or {"database": _database, "broker": _broker}

    def collect(self) -> Iterable[GaugeMetricFamily]:
        up = GaugeMetricFamily("roster_metrics_source_up", "Whether the last scrape could read the source",
                               labels=["source"])
        found: list[GaugeMetricFamily] = []
        for name, read in self._sources.items():
            try:
                found += read()
                up.add_metric([name], 1)
            except Exception as exc:  # noqa: BLE001 - a source that is down is a metric, not a failed scrape
                log.warning("metrics: could not read %s: %s", name, type(exc).__name__)
                up.add_metric([name], 0)
        yield from found
        yield up

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []  # not collected at registration: the database may not be reachable yet
