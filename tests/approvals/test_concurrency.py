"""Two waiters collecting the same approval at once: exactly one gets it. Runs on SQLite here and on
PostgreSQL through tests/integration/test_on_postgresql.py."""

import threading

import pytest
from django.db import connection

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_consume, approval_decide
from tests.approvals.helpers import approver, open_approval

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("waiters", [2, 8])
def test_concurrent_consumers_get_it_once(live_run, waiters):
    run = live_run[0]
    approval = open_approval(run)
    approval_decide(approval.pk, approver(), True, "web")
    barrier = threading.Barrier(waiters)
    results = []

    def consume():
        try:
            barrier.wait()
            results.append(approval_consume(approval.pk, run.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=consume) for _ in range(waiters)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * (waiters - 1) + [True]
    assert Approval.objects.get(pk=approval.pk).status == "used"
