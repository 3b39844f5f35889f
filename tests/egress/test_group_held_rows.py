"""A group of decisions holds its spend lines, run decisions and audit records for one INSERT per table
at its end (controlplane.core.held_rows), and every statement that reads those tables inside the group
still sees every row appended before it: budgets stay exact across a group's decisions, an outcome finds
its reservation, and nothing is lost or written twice. Also run on PostgreSQL with prepared statements
(tests/integration/test_on_postgresql.py)."""

import contextlib

import pytest
from django.db import connection

from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_database
from controlplane.egress.db_thread import as_group
from controlplane.egress.decide import decide
from controlplane.egress.gateway_calls import egress_request
from controlplane.egress.schemas import DecideIn
from controlplane.fleet.models import RunDecision
from controlplane.ledger.models import Cap, SpendLine
from controlplane.ledger.services import settle
from tests.egress.fixtures import decide_body

pytestmark = pytest.mark.django_db(transaction=True)

_TABLES = (SpendLine._meta.db_table, RunDecision._meta.db_table, AuditRecord._meta.db_table)


@contextlib.contextmanager
def _inserts():
    """table -> the INSERT statements sent into it while the block runs."""
    seen: dict[str, int] = dict.fromkeys(_TABLES, 0)

    def wrapper(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("INSERT"):
            for table in _TABLES:
                if f"INSERT INTO {table} " in sql or f'INSERT INTO "{table}"' in sql:
                    seen[table] += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield seen


def _request(token):
    return egress_request(DecideIn.model_validate(decide_body(token)))


def test_a_group_of_allows_writes_one_insert_per_table(token, secret, make_grant):
    make_grant(secret=secret, inject_header="authorization", cost_per_call=7)
    req = _request(token)
    before = AuditRecord.objects.count()  # the worker's, run's, secret's own records
    with _inserts() as inserts, as_group():
        answers = [decide(req) for _ in range(12)]
    assert [a.decision.verdict for a in answers] == ["allow"] * 12
    assert inserts == dict.fromkeys(_TABLES, 1)
    decision_ids = {a.decision_id for a in answers}
    assert set(RunDecision.objects.values_list("decision_id", flat=True)) == decision_ids
    lines = list(SpendLine.objects.values_list("decision_id", "unit", "amount"))
    assert sorted(lines) == sorted([(d, "requests", 1) for d in decision_ids] + [(d, "micro", 7)
                                                                                 for d in decision_ids])
    # three records per allow (the decision, its reservation, the credential use), in one chain
    assert AuditRecord.objects.count() - before == 36
    assert verify_database().ok


def test_a_cap_stays_exact_across_the_decisions_of_one_group(token, secret, make_grant, worker):
    make_grant(secret=secret, inject_header="authorization")
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=5)
    req = _request(token)
    with as_group():
        answers = [decide(req) for _ in range(9)]
    verdicts = [(a.decision.verdict, a.decision.reason or "") for a in answers]
    # each decision's total read the lines the group's earlier decisions still held
    assert verdicts == [("allow", "")] * 5 + [("deny", "over_budget")] * 4
    assert SpendLine.objects.filter(unit="requests").count() == 5
    assert RunDecision.objects.count() == 5
    assert verify_database().ok


def test_an_outcome_in_the_same_group_finds_its_held_reservation(token, secret, make_grant):
    make_grant(secret=secret, inject_header="authorization")
    req = _request(token)
    with as_group():
        answer = decide(req)
        # the settle's lookup names the spend lines: the held ones are written before it runs
        settle(answer.decision_id, 10, 20)
        later = decide(req)
    assert later.decision.verdict == "allow"
    kinds = sorted(SpendLine.objects.filter(decision_id=answer.decision_id).values_list("kind", flat=True))
    assert kinds == ["reserve", "settle"]
    assert SpendLine.objects.filter(decision_id=later.decision_id).count() == 1
    assert verify_database().ok


def test_a_group_that_fails_leaves_no_held_row_behind(token, secret, make_grant):
    make_grant(secret=secret, inject_header="authorization")
    req = _request(token)
    before = AuditRecord.objects.count()
    with pytest.raises(RuntimeError), as_group():
        decide(req)
        decide(req)
        raise RuntimeError("the group fails after its decisions")
    counts = (SpendLine.objects.count(), RunDecision.objects.count(), AuditRecord.objects.count())
    assert counts == (0, 0, before)
    with as_group():
        assert decide(req).decision.verdict == "allow"
    assert (SpendLine.objects.count(), RunDecision.objects.count()) == (1, 1)
    assert verify_database().ok
