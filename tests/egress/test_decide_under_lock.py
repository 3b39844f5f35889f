"""A decision reads the run it judges under the audit chain's lock (docs/operations.md, "Decision API
processes"): while another decision API process holds the lock and, in its still open transaction, ends
the run or raises its taint, a decision here waits, then judges the run as that commit left it: denied,
never allowed on the state from before. Alone and in a group (controlplane.egress.db_thread). On SQLite
the IMMEDIATE transaction waits at BEGIN; on PostgreSQL (tests/integration/test_on_postgresql.py), where
reads never wait for writers, only taking the advisory lock before the first read makes this hold."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from controlplane.audit.services import lock_chain_head
from controlplane.core.taint import DataClass
from controlplane.egress.db_thread import as_group
from controlplane.egress.decide import decide
from controlplane.egress.gateway_calls import egress_request
from controlplane.egress.schemas import DecideIn
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_raise_taint, run_set_status
from tests.egress.fixtures import decide_body

pytestmark = pytest.mark.django_db(transaction=True)
CHANGES = {
    "run ended": (lambda run_id: run_set_status(run_id, Run.Status.CANCELLED), "bad_token"),
    "taint raised": (lambda run_id: run_raise_taint(run_id, DataClass.SECRET, False), "taint_too_high"),
}


def _other_process(run_id: int, change, locked: threading.Event, release: threading.Event) -> None:
    """What a decision API process in the middle of its group does: the lock held, the run changed, not
    yet committed."""
    try:
        with transaction.atomic():
            lock_chain_head()
            change(run_id)
            locked.set()
            release.wait(10)
    finally:
        connection.close()


def _decide(req, grouped: bool, answers: dict) -> None:
    try:
        if grouped:
            with as_group():
                answers["answer"] = decide(req)
        else:
            answers["answer"] = decide(req)
    finally:
        connection.close()


@pytest.mark.parametrize("grouped", [False, True], ids=["alone", "in-a-group"])
@pytest.mark.parametrize("what", sorted(CHANGES))
def test_a_decision_waits_for_the_lock_and_judges_the_run_as_committed(token, live_run, make_grant,
                                                                       grouped, what):
    make_grant(max_taint=DataClass.PRIVATE)
    req = egress_request(DecideIn.model_validate(decide_body(token)))
    assert decide(req).decision.verdict == "allow"  # the run as it stands: allowed
    change, reason = CHANGES[what]
    locked, release, answers = threading.Event(), threading.Event(), {}
    other = threading.Thread(target=_other_process, args=(live_run[0].pk, change, locked, release))
    other.start()
    try:
        assert locked.wait(10)
        deciding = threading.Thread(target=_decide, args=(req, grouped, answers))
        deciding.start()
        time.sleep(0.3)
        assert "answer" not in answers  # waiting for the lock, not deciding on the uncommitted run
    finally:
        release.set()
        other.join(10)
    deciding.join(30)
    answer = answers["answer"]
    assert (answer.decision.verdict, answer.decision.reason) == ("deny", reason)
