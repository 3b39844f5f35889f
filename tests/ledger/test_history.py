"""Spend over time from the ledger: each cap's running total over its own window (the last point is
exactly what the gate sums), the cap's limit carried with it, and a run's reserved and net spend."""

from __future__ import annotations

import datetime as dt
from unittest import mock

import pytest

from controlplane.fleet.models import Run, Worker
from controlplane.ledger.history import cap_histories, cap_history, run_spend
from controlplane.ledger.models import Cap, SpendLine
from controlplane.ledger.totals import spent_for

UTC = dt.UTC
NOW = dt.datetime(2026, 3, 15, 18, 30, tzinfo=UTC)


def _line(worker, at, amount, unit="requests", kind="settle", run=None):
    with mock.patch("django.utils.timezone.now", return_value=at):
        return SpendLine.objects.create(worker=worker, run=run, kind=kind, unit=unit, amount=amount)


@pytest.fixture
def other(db):
    return Worker.objects.create(name="ledger-other")


@pytest.fixture
def spread(worker, other):
    """Lines last month, yesterday, this morning and this evening, for two workers; one in bytes."""
    _line(worker, dt.datetime(2026, 2, 27, 9, tzinfo=UTC), 100)
    _line(worker, dt.datetime(2026, 3, 2, 9, tzinfo=UTC), 20)
    _line(worker, dt.datetime(2026, 3, 14, 23, 59, tzinfo=UTC), 7)
    _line(worker, dt.datetime(2026, 3, 15, 0, 0, 1, tzinfo=UTC), 3)
    _line(other, dt.datetime(2026, 3, 15, 9, tzinfo=UTC), 5)
    _line(worker, dt.datetime(2026, 3, 15, 17, tzinfo=UTC), 4)
    _line(worker, dt.datetime(2026, 3, 15, 17, 5, tzinfo=UTC), 9000, unit="bytes")


@pytest.mark.parametrize(("scope", "window", "spent", "start"), [
    ("worker", "day", 3 + 4, dt.datetime(2026, 3, 15, tzinfo=UTC)),
    ("org", "day", 3 + 5 + 4, dt.datetime(2026, 3, 15, tzinfo=UTC)),
    ("worker", "month", 20 + 7 + 3 + 4, dt.datetime(2026, 3, 1, tzinfo=UTC)),
    ("org", "month", 20 + 7 + 3 + 5 + 4, dt.datetime(2026, 3, 1, tzinfo=UTC)),
    ("worker", "all", 100 + 20 + 7 + 3 + 4, dt.datetime(2026, 2, 27, 9, tzinfo=UTC)),
])
def test_a_caps_running_total_covers_its_window_and_ends_at_what_the_gate_sums(
        spread, worker, scope, window, spent, start):
    cap = Cap.objects.create(worker=worker if scope == "worker" else None, unit="requests", window=window,
                             limit=40)
    history = cap_history(cap, NOW)
    assert history.start == start and history.end == NOW
    assert history.points[0] == (start, 0)
    assert history.spent == spent == spent_for([cap], NOW)[cap.pk]
    assert history.limit == 40 and history.unit == "requests" and history.has_spend
    totals = [total for _, total in history.points]
    assert totals == sorted(totals)  # only positive lines here: the total never falls
    assert all(start <= at <= NOW for at, _ in history.points)


def test_a_day_caps_points_fall_in_order_within_the_day(spread, worker):
    cap = Cap.objects.create(worker=None, unit="requests", window="day", limit=10)
    history = cap_history(cap, NOW)
    # 18h30 of day: minute buckets would exceed the budget, so hourly buckets
    assert [(at.hour, total) for at, total in history.points] == [(0, 0), (0, 3), (9, 8), (17, 12)]
    assert history.scope == "org"


def test_a_release_lowers_the_running_total(worker):
    cap = Cap.objects.create(worker=worker, unit="micro", window="day", limit=1_000)
    _line(worker, dt.datetime(2026, 3, 15, 10, tzinfo=UTC), 800, unit="micro", kind="reserve")
    _line(worker, dt.datetime(2026, 3, 15, 12, tzinfo=UTC), -500, unit="micro", kind="release")
    history = cap_history(cap, NOW)
    assert [total for _, total in history.points] == [0, 800, 300]
    assert history.spent == 300 == spent_for([cap], NOW)[cap.pk]


def test_no_spend_in_the_window_is_an_empty_history_not_an_error(worker):
    _line(worker, dt.datetime(2026, 3, 14, 10, tzinfo=UTC), 5)
    day = cap_history(Cap.objects.create(worker=None, unit="requests", window="day", limit=3), NOW)
    assert day.points == [(dt.datetime(2026, 3, 15, tzinfo=UTC), 0)] and not day.has_spend and day.spent == 0
    never = cap_history(Cap.objects.create(worker=None, unit="tokens", window="all", limit=3), NOW)
    assert never.points == [(NOW, 0)] and not never.has_spend


def test_org_and_worker_caps_are_listed_apart(spread, worker, other):
    org = Cap.objects.create(worker=None, unit="requests", window="day", limit=10)
    mine = Cap.objects.create(worker=worker, unit="bytes", window="day", limit=5_000)
    Cap.objects.create(worker=other, unit="requests", window="day", limit=1)
    assert [h.cap_id for h in cap_histories(None, NOW)] == [org.pk]
    [history] = cap_histories(worker, NOW)
    assert history.cap_id == mine.pk and history.spent == 9000 and history.scope == "worker:alpha"


def test_a_runs_spend_by_unit_reserved_against_net(worker):
    with mock.patch("django.utils.timezone.now", return_value=dt.datetime(2026, 3, 15, 10, tzinfo=UTC)):
        run = Run.objects.create(worker=worker)
    other_run = Run.objects.create(worker=worker)
    at = dt.datetime(2026, 3, 15, 10, 0, 5, tzinfo=UTC)
    _line(worker, at, 1, kind="reserve", run=run)
    _line(worker, at, 2_000, unit="micro", kind="reserve", run=run)
    _line(worker, at + dt.timedelta(seconds=30), -1_500, unit="micro", kind="release", run=run)
    _line(worker, at + dt.timedelta(seconds=30), 300, unit="micro", kind="settle", run=run)
    _line(worker, at + dt.timedelta(seconds=31), 400, unit="bytes", kind="settle", run=run)
    _line(worker, at, 50, kind="reserve", run=other_run)
    start, end, units = run_spend(run, dt.datetime(2026, 3, 15, 10, 3, tzinfo=UTC))
    assert start == run.created_at and end == dt.datetime(2026, 3, 15, 10, 3, tzinfo=UTC)
    by_unit = {u.unit: u for u in units}
    assert list(by_unit) == ["requests", "bytes", "micro"]  # the ledger's unit order
    assert by_unit["requests"].reserved[-1][1] == 1 and by_unit["requests"].net[-1][1] == 1
    assert by_unit["micro"].reserved[-1][1] == 2_000 and by_unit["micro"].net[-1][1] == 800
    assert [total for _, total in by_unit["micro"].net] == [0, 2_000, 800]
    assert by_unit["bytes"].reserved == [(start, 0)] and by_unit["bytes"].net[-1][1] == 400


def test_a_settle_after_the_run_ended_stretches_its_picture(worker):
    run = Run.objects.create(worker=worker)
    ended = run.created_at + dt.timedelta(seconds=10)
    Run.objects.filter(pk=run.pk).update(ended_at=ended)
    run.refresh_from_db()
    late = ended + dt.timedelta(seconds=20)
    _line(worker, late, 4, kind="settle", run=run)
    _start, end, units = run_spend(run)
    assert end == late and units[0].net[-1][1] == 4 and units[0].net[-1][0] <= late


def test_a_release_after_midnight_of_a_reserve_before_it_can_take_the_day_below_zero(worker):
    # A model call reserved at 23:59 and settled after midnight: the day's sum is what the gate reads.
    cap = Cap.objects.create(worker=worker, unit="tokens", window="day", limit=100)
    _line(worker, dt.datetime(2026, 3, 14, 23, 59, tzinfo=UTC), 4_000, unit="tokens", kind="reserve")
    _line(worker, dt.datetime(2026, 3, 15, 0, 1, tzinfo=UTC), -4_000, unit="tokens", kind="release")
    _line(worker, dt.datetime(2026, 3, 15, 0, 1, tzinfo=UTC), 900, unit="tokens", kind="settle")
    history = cap_history(cap, NOW)
    assert history.spent == -3_100 == spent_for([cap], NOW)[cap.pk]
