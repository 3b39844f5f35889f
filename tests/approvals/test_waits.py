"""How long held requests made their box wait: decided ones until their decision, expired ones until
their expiry (swept or not yet), abandoned ones until the box gave up, pending ones until now, each at
most until the gateway's hold ended or it let go (issue 27.1: the chart counted the approval's lifetime)."""

from __future__ import annotations

import datetime as dt
from unittest import mock

import pytest

from controlplane.approvals.models import Approval
from controlplane.approvals.waits import held_request_waits, summarise
from controlplane.fleet.services import run_create, worker_create

UTC = dt.UTC
NOW = dt.datetime(2026, 3, 15, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _long_hold(settings):
    # Most tests here are about the outcomes: a hold longer than any wait, so it never cuts one short.
    settings.ROSTER_APPROVAL_HOLD_SECONDS = 7200
    settings.ROSTER_APPROVAL_TTL_SECONDS = 7200


@pytest.fixture
def run(db):
    run, _token = run_create(worker_create("waiter"), command=["true"])
    return run


def _held(run, created: dt.datetime, ttl: float = 300, **fields) -> Approval:
    with mock.patch("django.utils.timezone.now", return_value=created):
        return Approval.objects.create(run=run, grant_slug="g", request={}, request_digest="d" * 64,
                                       expires_at=created + dt.timedelta(seconds=ttl), **fields)


def _at(minutes: float) -> dt.datetime:
    return NOW - dt.timedelta(minutes=minutes)


def test_each_outcome_waits_until_its_own_end(run):
    _held(run, _at(50), status="approved", decided_at=_at(50) + dt.timedelta(seconds=12))
    _held(run, _at(40), status="used", decided_at=_at(40) + dt.timedelta(seconds=30),
          used_at=_at(40) + dt.timedelta(seconds=31))
    _held(run, _at(30), status="refused", decided_at=_at(30) + dt.timedelta(seconds=90))
    _held(run, _at(20), ttl=300, status="expired")  # swept: ends at its expiry
    _held(run, _at(10), ttl=120)  # pending past its expiry, not swept yet: expired all the same
    _held(run, _at(8), ttl=3600, abandoned_at=_at(8) + dt.timedelta(seconds=75))  # the box gave up
    _held(run, _at(2), ttl=3600)  # still held
    waits = held_request_waits(NOW - dt.timedelta(days=1), NOW)
    assert [(w.outcome, w.seconds) for w in waits] == [
        ("approved", 12), ("approved", 30), ("refused", 90), ("expired", 300), ("expired", 120),
        ("abandoned", 75), ("waiting", 120)]
    assert {w.worker for w in waits} == {"waiter"}


def test_a_late_decision_after_the_box_gave_up_counts_what_the_box_waited(run):
    _held(run, _at(10), ttl=3600, status="approved", abandoned_at=_at(9), decided_at=_at(5))
    [wait] = held_request_waits(_at(60), NOW)
    assert wait.outcome == "approved" and wait.seconds == 60


def test_the_box_waits_at_most_the_gateway_hold_not_the_approval_life(run, settings):
    """The issue's case: the box is held 60 s, the approval lives 5 min."""
    settings.ROSTER_APPROVAL_HOLD_SECONDS = 60
    settings.ROSTER_APPROVAL_TTL_SECONDS = 300
    _held(run, _at(50), ttl=300, status="expired", abandoned_at=_at(49))  # the gateway let go, then expiry
    _held(run, _at(40), ttl=300, status="expired")  # no report of the gateway letting go: the hold ends it
    _held(run, _at(30), ttl=300, status="approved", decided_at=_at(27), abandoned_at=_at(29))
    _held(run, _at(20), ttl=300, status="refused", decided_at=_at(20) + dt.timedelta(seconds=20))
    _held(run, _at(3), ttl=300)  # pending, the box was let go after its hold
    _held(run, _at(0.5), ttl=300)  # still held: 30 s so far
    waits = held_request_waits(_at(60), NOW)
    assert [(w.outcome, w.seconds) for w in waits] == [
        ("expired", 60), ("expired", 60), ("approved", 60), ("refused", 20), ("abandoned", 60),
        ("waiting", 30)]


def test_only_requests_held_since_the_start_count(run):
    _held(run, _at(60 * 24 * 3), status="refused", decided_at=_at(60 * 24 * 3 - 1))
    _held(run, _at(1), ttl=3600)
    waits = held_request_waits(NOW - dt.timedelta(days=1), NOW)
    assert [w.outcome for w in waits] == ["waiting"]


def test_summary_per_outcome_in_a_fixed_order(run):
    for seconds in (10, 20, 90):
        _held(run, _at(30), status="approved", decided_at=_at(30) + dt.timedelta(seconds=seconds))
    _held(run, _at(3), ttl=3600)
    _held(run, _at(1), ttl=3600)
    summary = summarise(held_request_waits(_at(60), NOW))
    assert [(s.outcome, s.count, s.median_seconds, s.longest_seconds) for s in summary] == [
        ("approved", 3, 20, 90), ("waiting", 2, 120, 180)]
    assert summarise([]) == []


def test_a_clock_oddity_never_gives_a_negative_wait(run):
    _held(run, _at(5), status="refused", decided_at=_at(6))
    [wait] = held_request_waits(_at(60), NOW)
    assert wait.seconds == 0
