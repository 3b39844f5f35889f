"""reserve / settle against caps: units, scopes, windows, bad input, audit lines."""

import datetime as dt
import json

import pytest
from django.db.models import Sum

from controlplane.audit.models import AuditRecord
from controlplane.fleet.models import Worker
from controlplane.ledger import services
from controlplane.ledger.models import Cap, SpendLine
from controlplane.ledger.types import AlreadySettled, LedgerError, OverBudget, Reservation, UnknownDecision

pytestmark = pytest.mark.django_db


def _reserve(worker, run, decision_id, cost=0):
    return services.reserve(worker=worker, run=run, grant_slug="g", decision_id=decision_id,
                            cost_micro=cost, origin="human")


def test_without_caps_every_call_is_reserved_and_lines_appended(worker, run, new_decision_id):
    res = _reserve(worker, run, new_decision_id(), cost=7)
    assert isinstance(res, Reservation)
    assert dict(SpendLine.objects.values_list("unit", "amount")) == {"requests": 1, "micro": 7}


def test_request_cap_allows_exactly_limit_then_names_cap(worker, run, new_decision_id):
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=3)
    results = [_reserve(worker, run, new_decision_id()) for _ in range(5)]
    assert [isinstance(r, Reservation) for r in results] == [True, True, True, False, False]
    over = results[3]
    assert isinstance(over, OverBudget)
    assert over.as_dict() == {"scope": "worker:alpha", "unit": "requests", "window": "day", "limit": 3,
                              "spent": 3, "reserved": 1, "in_flight": 0, "held": 0}
    assert SpendLine.objects.filter(unit="requests").count() == 3


def test_org_cap_counts_every_worker(worker, run, new_decision_id):
    other = Worker.objects.create(name="other")
    Cap.objects.create(worker=None, unit="requests", window="all", limit=2)
    assert isinstance(_reserve(worker, run, new_decision_id()), Reservation)
    assert isinstance(_reserve(other, None, new_decision_id()), Reservation)
    over = _reserve(worker, run, new_decision_id())
    assert isinstance(over, OverBudget) and over.scope == "org" and over.window == "all"


def test_micro_cap_uses_grant_cost(worker, run, new_decision_id):
    Cap.objects.create(worker=worker, unit="micro", window="month", limit=100)
    assert isinstance(_reserve(worker, run, new_decision_id(), cost=60), Reservation)
    over = _reserve(worker, run, new_decision_id(), cost=50)
    assert isinstance(over, OverBudget) and over.unit == "micro" and over.spent == 60
    assert isinstance(_reserve(worker, run, new_decision_id(), cost=40), Reservation)


def test_bytes_cap_refuses_once_spent_reaches_cap(worker, run, new_decision_id):
    Cap.objects.create(worker=worker, unit="bytes", window="day", limit=1000)
    first = new_decision_id()
    assert isinstance(_reserve(worker, run, first), Reservation)
    services.settle(first, 400, 599)
    second = new_decision_id()
    assert isinstance(_reserve(worker, run, second), Reservation)  # 999 < 1000
    services.settle(second, 1, 0)
    over = _reserve(worker, run, new_decision_id())
    assert isinstance(over, OverBudget) and over.unit == "bytes" and over.spent == 1000


def test_windows_only_count_lines_inside_them(worker, run, new_decision_id):
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=1)
    _reserve(worker, run, new_decision_id())
    # A line from yesterday: written with a fixed clock (lines can't be updated afterwards).
    yesterday = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    from unittest import mock

    with mock.patch("django.utils.timezone.now", return_value=yesterday):
        SpendLine.objects.create(worker=worker, run=run, decision_id="old", kind="reserve", unit="requests",
                                 amount=5)
    over = _reserve(worker, run, new_decision_id())
    assert isinstance(over, OverBudget) and over.spent == 1


def test_settle_errors_and_nothing_written(worker, run, new_decision_id):
    with pytest.raises(UnknownDecision):
        services.settle("dc_nope", 1, 1)
    did = new_decision_id()
    _reserve(worker, run, did)
    services.settle(did, 10, 20)
    with pytest.raises(AlreadySettled):
        services.settle(did, 10, 20)
    assert issubclass(AlreadySettled, LedgerError) and issubclass(UnknownDecision, LedgerError)
    assert SpendLine.objects.filter(unit="bytes").aggregate(s=Sum("amount"))["s"] == 30
    with pytest.raises(ValueError):
        services.settle(new_decision_id(), -1, 0)


@pytest.mark.parametrize("cost", [-1, 1.5, True, "3"])
def test_bad_cost_is_refused(worker, run, new_decision_id, cost):
    with pytest.raises(ValueError):
        _reserve(worker, run, new_decision_id(), cost=cost)
    assert not SpendLine.objects.exists()


def test_duplicate_decision_id_is_refused(worker, run, new_decision_id):
    did = new_decision_id()
    _reserve(worker, run, did)
    with pytest.raises(LedgerError):
        _reserve(worker, run, did)
    assert SpendLine.objects.filter(decision_id=did).count() == 1


def test_a_second_allow_of_one_decision_id_is_refused_by_its_run_decision(worker, run, new_decision_id):
    """An allow skips the lookup for an earlier reservation (run_decision_follows): the RunDecision it
    writes in the same transaction is unique per decision id, so a second one rolls back whole."""
    from django.db import IntegrityError, transaction

    from controlplane.fleet.sql import run_decision_insert

    did = new_decision_id()

    def allow_once():
        with transaction.atomic():
            services.reserve(worker=worker, run=run, grant_slug="g", decision_id=did, cost_micro=3,
                             origin="human", run_decision_follows=True)
            run_decision_insert(decision_id=did, run_id=run.pk, grant_slug="g", result_class=0,
                                untrusted=False, trace=False, method="GET", url="https://x.example/",
                                secret_name="")

    allow_once()
    records = AuditRecord.objects.count()
    with pytest.raises(IntegrityError):
        allow_once()
    assert SpendLine.objects.filter(decision_id=did).count() == 2  # requests and micro, once
    assert AuditRecord.objects.count() == records


def test_spend_is_audited_in_same_transaction(worker, run, new_decision_id):
    did = new_decision_id()
    _reserve(worker, run, did, cost=5)
    services.settle(did, 3, 4)
    records = [json.loads(r.body) for r in AuditRecord.objects.filter(kind="spend")]
    assert [r["data"]["op"] for r in records] == ["reserve", "settle"]
    assert records[0]["data"]["micro"] == 5 and records[1]["data"]["bytes"] == 7
    assert records[0]["worker"] == "alpha" and records[0]["run"] == run.pk


def test_over_budget_writes_nothing(worker, run, new_decision_id):
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=0)
    assert isinstance(_reserve(worker, run, new_decision_id()), OverBudget)
    assert not SpendLine.objects.exists() and not AuditRecord.objects.exists()
