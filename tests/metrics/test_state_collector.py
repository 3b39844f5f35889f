"""The scrape-time collector: pending approvals, spend against each cap, runs by state and Celery queue
length, read from the real database and a real Redis when scraped; a source that cannot be read is
reported down without failing the scrape."""

from __future__ import annotations

import uuid

import pytest
import redis
from prometheus_client import CollectorRegistry

from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status
from controlplane.ledger.models import Cap
from controlplane.metrics.state import StateCollector
from tests.egress.fixtures import decide_body
from tests.support import procs

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(settings, redis_url):
    name = f"metrics-test-{uuid.uuid4().hex[:8]}"
    settings.CELERY_BROKER_URL = redis_url
    settings.ROSTER_METRICS_CELERY_QUEUES = (name,)
    client = redis.Redis.from_url(redis_url)
    yield client, name
    client.delete(name)
    client.close()


def scrape(collector: StateCollector | None = None) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(collector or StateCollector())
    return registry


def test_runs_by_state_every_state_reported(worker, queue):
    for status in (None, Run.Status.RUNNING, Run.Status.RUNNING, Run.Status.SUCCEEDED):
        run, _ = run_create(worker)
        if status:
            run_set_status(run.pk, status)
    registry = scrape()
    counts = {state: registry.get_sample_value("roster_runs", {"state": state})
              for state in Run.Status.values}
    assert counts == {**dict.fromkeys(Run.Status.values, 0.0), "queued": 1.0, "running": 2.0,
                      "succeeded": 1.0}


def test_pending_approvals_and_spend_per_cap(gateway, token, worker, make_grant, queue):
    Cap.objects.create(worker=None, unit="requests", window="day", limit=10)
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=5)
    make_grant()
    make_grant(slug="asked", host="asked.example", mode="ask")
    for _ in range(2):
        assert gateway.decide(decide_body(token))["verdict"] == "allow"
    assert gateway.decide(decide_body(token, host="asked.example"))["verdict"] == "ask"
    registry = scrape()
    assert registry.get_sample_value("roster_approvals_pending") == 1
    org = {"scope": "org", "unit": "requests", "window": "day"}
    own = {"scope": f"worker:{worker.name}", "unit": "requests", "window": "day"}
    assert registry.get_sample_value("roster_cap_limit", org) == 10
    assert registry.get_sample_value("roster_cap_limit", own) == 5
    assert registry.get_sample_value("roster_cap_spent", org) == 2
    assert registry.get_sample_value("roster_cap_spent", own) == 2


def test_celery_queue_length_is_the_brokers_list_length(queue):
    client, name = queue
    client.rpush(name, b"task-1", b"task-2", b"task-3")
    registry = scrape()
    assert registry.get_sample_value("roster_celery_queue_length", {"queue": name}) == 3
    assert registry.get_sample_value("roster_metrics_source_up", {"source": "broker"}) == 1
    assert registry.get_sample_value("roster_metrics_source_up", {"source": "database"}) == 1


def test_a_broker_that_is_down_is_reported_and_the_rest_still_scraped(settings, worker):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{procs.free_port()}/0"
    run_create(worker)
    registry = scrape()
    assert registry.get_sample_value("roster_metrics_source_up", {"source": "broker"}) == 0
    assert registry.get_sample_value("roster_celery_queue_length", {"queue": "celery"}) is None
    assert registry.get_sample_value("roster_runs", {"state": "queued"}) == 1


def test_a_failing_source_never_fails_the_scrape():
    def broken():
        raise RuntimeError("database is gone")

    registry = scrape(StateCollector({"database": broken}))
    assert registry.get_sample_value("roster_metrics_source_up", {"source": "database"}) == 0
    assert registry.get_sample_value("roster_approvals_pending") is None
