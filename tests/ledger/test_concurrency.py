"""Concurrent requests never overshoot a cap: cap 100, 400 requests at concurrency 32 -> exactly 100
allowed and the ledger holds exactly 100. Runs on SQLite here and on PostgreSQL through
tests/integration/test_on_postgresql.py (same file, DATABASE_URL pointing at a real server)."""

import os

import pytest
from django.db import connection
from django.db.models import Count, Sum

from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_database
from controlplane.fleet.models import Worker
from controlplane.ledger.models import Cap, SpendLine
from tests.ledger import children
from tests.ledger.hammer import concurrently, decide

pytestmark = pytest.mark.django_db(transaction=True)


def _forks() -> int:
    return AuditRecord.objects.values("prev_hash").annotate(n=Count("id")).filter(n__gt=1).count()


def test_runs_on_the_expected_database():
    assert connection.vendor == os.environ.get("ROSTER_EXPECT_DB_VENDOR", connection.vendor)


def test_cap_100_with_400_requests_at_concurrency_32_threads():
    Worker.objects.create(name="hot")
    Cap.objects.create(worker=Worker.objects.get(name="hot"), unit="requests", window="day", limit=100)
    allowed = sum(concurrently(lambda i: decide("hot", f"t-{i}"), range(400), threads=32))
    assert allowed == 100
    assert SpendLine.objects.filter(unit="requests").aggregate(s=Sum("amount"))["s"] == 100
    assert SpendLine.objects.filter(unit="micro").aggregate(s=Sum("amount"))["s"] == 100
    assert AuditRecord.objects.filter(kind="decision", verdict="allow").count() == 100
    assert AuditRecord.objects.filter(kind="decision", reason="over_budget").count() == 300
    assert _forks() == 0 and verify_database().ok


def test_org_cap_across_workers_and_processes():
    for name in ("p1", "p2", "p3", "p4"):
        Worker.objects.create(name=name)
    Cap.objects.create(worker=None, unit="requests", window="month", limit=60)
    procs = [children.spawn("reserve", "--worker", name, "--count", "40", "--threads", "4", "--prefix", name)
             for name in ("p1", "p2", "p3", "p4")]
    results = [children.result(p) for p in procs]
    assert sum(r["allowed"] for r in results) == 60
    assert SpendLine.objects.filter(unit="requests").aggregate(s=Sum("amount"))["s"] == 60
    assert _forks() == 0 and verify_database().checked == 160 + 60  # decisions + spend records
