"""`run show` (alias `run status`) and `run list`: a queued run says why it waits and where it stands; an
ended one says what became of it."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status


def _cli(*args) -> str:
    out = io.StringIO()
    call_command("run", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def full_host(worker, settings):
    """Two box slots, both taken; two runs waiting behind them."""
    settings.ROSTER_BOX_NAMESPACE = "rstshow"
    settings.ROSTER_BOXES_PER_HOST = 2
    runs = [run_create(worker, command=["sleep", "60"])[0] for _ in range(4)]
    Run.objects.filter(pk__in=[runs[0].pk, runs[1].pk]).update(status=Run.Status.RUNNING, box_host="rstshow")
    return runs


def test_show_a_queued_run_says_why_it_waits_and_its_position(full_host):
    waiting = full_host[3]
    for action in ("show", "status"):
        lines = _cli(action, str(waiting.pk)).splitlines()
        assert lines[0] == f"run {waiting.pk}: queued"
        fields = dict(line.strip().split(":", 1) for line in lines[1:])
        assert fields["waiting"].strip() == ("waiting for a box slot: all 2 on this host are in use; "
                                             "position 2 of 2 (1 run ahead of it)")
        assert fields["position"].strip() == "2 of 2"
        assert fields["box slots"].strip() == "2 of 2 in use on this host"


def test_the_next_in_line_moves_up_when_a_run_ahead_is_cancelled(full_host):
    run_set_status(full_host[2].pk, Run.Status.CANCELLED, "cancelled")
    out = _cli("show", str(full_host[3].pk))
    assert "position:  1 of 1" in out and "(next in line)" in out


def test_show_an_ended_run_gives_its_reason_not_a_queue(full_host):
    run_set_status(full_host[0].pk, Run.Status.FAILED, "exit code 3\nand more", exit_code=3)
    out = _cli("show", str(full_host[0].pk))
    assert out.splitlines()[0] == f"run {full_host[0].pk}: failed"
    assert "reason:    exit code 3\\nand more" in out and "position" not in out and "exit code: 3" in out


def test_list_shows_the_queue_reason_of_queued_runs(full_host):
    rows = [line.split("\t") for line in _cli("list").splitlines()[1:]]
    by_id = {int(r[0]): r for r in rows}
    assert by_id[full_host[3].pk][7].startswith("waiting for a box slot: all 2 on this host are in use")
    assert by_id[full_host[0].pk][7] == "-"


def test_show_an_unknown_run_is_a_clear_error(worker):
    with pytest.raises(CommandError, match="no run 999999"):
        _cli("show", "999999")
