"""Admission (controlplane.dispatch.admission): at most ROSTER_BOXES_PER_HOST live boxes per box host,
queued runs admitted oldest first, and a queued run says why it waits and where it stands."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from controlplane.core.env import EnvReader
from controlplane.dispatch import admission, running
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status
from controlplane.settings.runs import _host_box_limit


@pytest.fixture
def host(settings):
    settings.ROSTER_BOX_NAMESPACE = "rsthost"
    settings.ROSTER_BOXES_PER_HOST = 2
    return settings


def _queued(worker, n):
    return [run_create(worker, command=["true"])[0] for _ in range(n)]


def _live(run, status=Run.Status.RUNNING, box_host="rsthost"):
    Run.objects.filter(pk=run.pk).update(status=status, box_host=box_host)


def _admit():
    return [run.pk for run, _token in admission.admit(running.run_claim)]


def test_admits_the_oldest_queued_runs_up_to_the_limit(worker, host):
    runs = _queued(worker, 4)
    assert _admit() == [runs[0].pk, runs[1].pk]
    statuses = list(Run.objects.order_by("pk").values_list("status", "box_host"))
    assert statuses == [("starting", "rsthost"), ("starting", "rsthost"), ("queued", ""), ("queued", "")]
    assert _admit() == []  # full: nothing more, nothing changed
    assert Run.objects.filter(status=Run.Status.QUEUED).count() == 2


def test_a_box_that_ends_frees_its_slot_for_the_next_in_line(worker, host):
    first, second, third = _queued(worker, 3)
    _admit()
    run_set_status(first.pk, Run.Status.SUCCEEDED)
    assert _admit() == [third.pk]
    assert Run.objects.get(pk=second.pk).status == Run.Status.STARTING


def test_other_hosts_boxes_do_not_count_and_ended_runs_do_not_count(worker, host):
    elsewhere, ended, waiting = _queued(worker, 3)
    _live(elsewhere, box_host="otherhost")
    _live(ended, status=Run.Status.FAILED)
    assert _admit() == [waiting.pk]


def test_starting_boxes_count_as_live(worker, host):
    a, b, c = _queued(worker, 3)
    _live(a, status=Run.Status.STARTING)
    _live(b)
    assert _admit() == []
    assert Run.objects.get(pk=c.pk).status == Run.Status.QUEUED


def test_a_run_taken_by_another_pass_is_skipped_not_waited_on(worker, host):
    first, second, third = _queued(worker, 3)

    def claim(run_id):
        if run_id == first.pk:
            return None  # cancelled, or claimed by a concurrent pass, since the read
        return running.run_claim(run_id)

    got = [run.pk for run, _ in admission.admit(claim)]
    assert got == [second.pk, third.pk]


def test_position_and_reason_of_a_queued_run(worker, host):
    a, b, c, d = _queued(worker, 4)
    _admit()  # a and b take both slots
    state = admission.queue_state(Run.objects.get(pk=d.pk))
    assert (state.position, state.queued, state.live, state.limit) == (2, 2, 2, 2)
    assert state.reason == ("waiting for a box slot: all 2 on this host are in use; position 2 of 2 "
                            "(1 run ahead of it)")
    first = admission.queue_state(Run.objects.get(pk=c.pk))
    assert first.position == 1 and first.reason.endswith("(next in line)")
    assert admission.queue_state(Run.objects.get(pk=a.pk)) is None  # not queued: no queue state


def test_reason_when_a_slot_is_free_but_the_dispatch_has_not_come(worker, host):
    (run,) = _queued(worker, 1)
    state = admission.queue_state(run)
    assert state.reason == ("waiting to be dispatched: 2 of 2 box slots free; position 1 of 1 "
                            "(next in line)")


def test_the_default_limit_is_sized_to_the_host():
    assert _host_box_limit("512m") >= 2
    assert _host_box_limit("not a size") == 2
    assert _host_box_limit("1g") <= _host_box_limit("256m")


@pytest.mark.parametrize("raw", ["0", "-3", "many"])
def test_a_bad_limit_is_a_clear_error(raw):
    with pytest.raises(ImproperlyConfigured, match="ROSTER_BOXES_PER_HOST"):
        EnvReader({"ROSTER_BOXES_PER_HOST": raw}).int("ROSTER_BOXES_PER_HOST", 4, minimum=1)
