"""A reservation with no outcome past ROSTER_RESERVATION_DEADLINE_SECONDS is settled at its worst case,
flagged overdue (issue 22.3); one that is not yet due, or already settled, is left alone; a late outcome
then changes nothing; and an overdue reservation no longer counts as held by a call in flight."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.db.models import Sum
from django.utils import timezone

from controlplane.audit.models import AuditRecord
from controlplane.ledger.in_flight import held_of
from controlplane.ledger.models import Cap, ModelPrice, SpendLine
from controlplane.ledger.overdue import settle_overdue
from controlplane.ledger.services import reserve, settle
from controlplane.ledger.tasks import settle_overdue_reservations
from controlplane.ledger.types import AlreadySettled, ModelCallFacts, TokenUsage

pytestmark = pytest.mark.django_db
CALL = ModelCallFacts(api="chat", model="gpt-4o", stream=True, max_output_tokens=100, choices=1,
                      input_estimate=100)


@pytest.fixture(autouse=True)
def price(db):
    ModelPrice.objects.create(pattern="gpt-4o*", input_micro_per_million=1_000_000,
                              cached_input_micro_per_million=1_000_000, output_micro_per_million=1_000_000,
                              max_output_tokens=4096)


def _reserve(worker, run, decision_id, model_call=CALL):
    return reserve(worker=worker, run=run, grant_slug="model", decision_id=decision_id, cost_micro=0,
                   origin="human", model_call=model_call)


def _total(unit: str) -> int:
    return SpendLine.objects.filter(unit=unit).aggregate(s=Sum("amount"))["s"] or 0


def _later(settings, seconds: int) -> dt.datetime:
    return timezone.now() + dt.timedelta(seconds=settings.ROSTER_RESERVATION_DEADLINE_SECONDS + seconds)


def test_an_overdue_reservation_settles_at_its_worst_case_flagged(worker, run, settings):
    _reserve(worker, run, "dc_lost")
    _reserve(worker, run, "dc_fine")
    settle("dc_fine", 5, 5, TokenUsage(known=True, input=10, output=20))
    assert settle_overdue(timezone.now()) == 0  # not yet due
    assert settle_overdue(_later(settings, 5)) == 1
    lost = SpendLine.objects.filter(decision_id="dc_lost", unit="tokens")
    assert sum(line.amount for line in lost) == 200  # reserved 200, released 200, settled 200
    records = AuditRecord.objects.filter(kind="spend").order_by("seq")
    record = [json.loads(r.body)["data"] for r in records][-1]
    assert record["decision_id"] == "dc_lost" and record["overdue"] is True and record["flagged"] is True
    assert record["model"]["usage"] == "worst_case" and "deadline" in record["model"]["problem"]
    assert _total("bytes") == 10  # dc_fine's; the lost call's bytes are not known
    assert settle_overdue(_later(settings, 10)) == 0  # once
    with pytest.raises(AlreadySettled):
        settle("dc_lost", 1, 1, None)  # the late outcome: answered already_settled, nothing written


def test_a_non_model_reservation_is_settled_too(worker, run, settings):
    _reserve(worker, run, "dc_plain", model_call=None)
    assert settle_overdue_reservations.apply(kwargs={}).get() == 0
    assert settle_overdue(_later(settings, 1)) == 1
    assert SpendLine.objects.filter(decision_id="dc_plain", kind="settle").count() == 1


def test_an_overdue_reservation_is_not_held_in_flight(worker, run, settings):
    cap = Cap.objects.create(worker=worker, unit="tokens", window="all", limit=10_000)
    _reserve(worker, run, "dc_a")
    assert held_of(cap, timezone.now()).calls == 1
    assert held_of(cap, _later(settings, 1)).calls == 0  # past the deadline: the reaper settles it
