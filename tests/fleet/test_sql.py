"""The fleet tables' plain SQL for the decision path (controlplane.fleet.sql): the run read by token is a
real loaded instance, the run decision's statements write and lock what the ORM would."""

import pytest

from controlplane.fleet.models import Run, RunDecision
from controlplane.fleet.selectors import live_run_for_token
from controlplane.fleet.services import run_create, run_set_status, worker_create
from controlplane.fleet.sql import run_decision_for_outcome, run_decision_insert, run_decision_mark_outcome

pytestmark = pytest.mark.django_db


def _live_run(task: str = "") -> tuple[Run, str]:
    run, raw = run_create(worker_create("sql-reader"), task=task)
    return run_set_status(run.pk, Run.Status.RUNNING), raw


def test_the_run_read_by_token_is_a_loaded_instance_whose_other_columns_are_the_stored_ones():
    stored, raw = _live_run(task="summarise the inbox")
    run = live_run_for_token(raw, with_policy_version=True)
    assert (run.pk, run.worker_id, run.worker.name, run.status) == (stored.pk, stored.worker_id, "sql-reader",
                                                                    "running")
    assert run._state.adding is False and run.worker._state.adding is False
    assert run.untrusted is False and run.policy_version is not None
    # A column the statement does not read is the stored value, never a default standing in for it.
    assert run.task == "summarise the inbox"
    assert run.worker.description == stored.worker.description


@pytest.mark.parametrize("token", ["", "not-a-token", "rt_" + "0" * 43])
def test_no_run_for_a_bad_or_unknown_token(token):
    _live_run()
    assert live_run_for_token(token) is None


def test_no_run_once_it_ended_or_its_worker_was_deactivated():
    run, raw = _live_run()
    run.worker.active = False
    run.worker.save()
    assert live_run_for_token(raw) is None
    run.worker.active = True
    run.worker.save()
    assert live_run_for_token(raw) is not None
    run_set_status(run.pk, Run.Status.SUCCEEDED)
    assert live_run_for_token(raw) is None


def test_run_decision_written_found_and_marked():
    run, _ = _live_run()
    assert run_decision_for_outcome("d-unknown") is None
    run_decision_insert(decision_id="d-1", run_id=run.pk, grant_slug="g", result_class=2, untrusted=True,
                        trace=False, method="GET", url="https://example.test/", secret_name="s")
    record_id, outcome_at, run_id, grant_slug, secret_name, url = run_decision_for_outcome("d-1")
    assert (outcome_at, run_id, grant_slug, secret_name, url) == (None, run.pk, "g", "s", "https://example.test/")
    run_decision_mark_outcome(record_id, 204)
    record = RunDecision.objects.get(decision_id="d-1")
    assert record.outcome_status == 204 and record.outcome_at is not None and record.untrusted is True
