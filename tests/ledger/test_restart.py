"""Totals survive a restart: they are sums over the ledger, so a brand-new process reads the same
totals and keeps refusing once over a cap."""

import pytest

from controlplane.fleet.models import Worker
from controlplane.ledger import services
from controlplane.ledger.models import Cap
from controlplane.ledger.selectors import cap_statuses
from tests.ledger import children

pytestmark = pytest.mark.django_db(transaction=True)


def test_new_process_reads_the_same_totals_and_keeps_refusing():
    worker = Worker.objects.create(name="restart-w")
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=5)
    Cap.objects.create(worker=worker, unit="bytes", window="month", limit=10_000)
    Cap.objects.create(worker=None, unit="micro", window="all", limit=1_000)
    for i in range(5):
        services.reserve(worker=worker, run=None, grant_slug="g", decision_id=f"r-{i}", cost_micro=30,
                         origin="human")
        services.settle(f"r-{i}", 100, 900 + i)
    here = [s.as_dict() for s in cap_statuses()]
    assert {(s["unit"], s["spent"]) for s in here} == {("requests", 5), ("bytes", 5010), ("micro", 150)}
    assert children.run("totals") == here
    # ... and the fresh process enforces them: the 6th request is over the requests cap.
    assert children.run("reserve", "--worker", "restart-w", "--count", "3", "--prefix", "after") == {
        "allowed": 0, "denied": 3}
