"""A decision in a group is judged before the group takes the chain's lock (controlplane.egress.decide's
_judge_before_the_lock, run by the database thread outside any transaction: db_thread.prepared_args),
and decided under the lock only on the same footing: a run that ended, a taint raised, a grant revoked
between the two is judged again on the current state. A judgement that fails, or a token that names no
run, is left to be made under the lock, where it is refused and recorded as always."""

import asyncio

import pytest
from django.db import connection

from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_database
from controlplane.core.taint import DataClass
from controlplane.egress import decide as decide_module
from controlplane.egress.db_thread import GroupCommitter, as_group, groupable, in_group, prepared_args
from controlplane.egress.decide import decide
from controlplane.egress.gateway_calls import egress_request
from controlplane.egress.schemas import DecideIn
from controlplane.fleet.models import PolicyVersion, Run
from controlplane.fleet.services import run_raise_taint, run_set_status
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set
from tests.egress.fixtures import decide_body

pytestmark = pytest.mark.django_db(transaction=True)


def _request(token, **overrides):
    return egress_request(DecideIn.model_validate(decide_body(token, **overrides)))


def _in_group(args):
    with as_group():
        return decide(*args)


def _verdict(answer):
    return answer.decision.verdict, str(answer.decision.reason or "")


def test_judged_before_the_lock_and_allowed_on_the_same_footing(token, secret, make_grant):
    make_grant(secret=secret, inject_header="authorization")
    args = prepared_args(decide, _request(token))
    assert args[2] is not None and args[2].decision.verdict == "allow"  # the judgement travels with the job
    answer = _in_group(args)
    assert _verdict(answer) == ("allow", "")
    assert answer.inject and verify_database().ok


def test_a_taint_raised_after_the_judgement_is_judged_again(token, live_run, make_grant):
    make_grant(max_taint=DataClass(live_run[0].taint))
    args = prepared_args(decide, _request(token))
    assert args[2].decision.verdict == "allow"
    run_raise_taint(live_run[0].pk, DataClass(live_run[0].taint) + 1, untrusted=False)
    assert _verdict(_in_group(args)) == ("deny", "taint_too_high")


@pytest.fixture(params=["counted", "uncounted"])
def policy_counter(request, db):
    """The policy version's counter row as migrations leave it, and missing (a flushed table, a row
    deleted by hand): then no version vouches for unchanged grants."""
    if request.param == "counted":
        PolicyVersion.objects.get_or_create(pk=1, defaults={"version": 1})
    else:
        PolicyVersion.objects.all().delete()
    return request.param


def test_a_grant_revoked_after_the_judgement_is_judged_again(policy_counter, token, make_grant):
    grant = make_grant()
    args = prepared_args(decide, _request(token))
    assert args[2].decision.verdict == "allow"
    Grant.objects.filter(pk=grant.pk).update(enabled=False)  # the policy version moves (a trigger)
    assert _verdict(_in_group(args)) == ("deny", "no_grant")


def test_a_secret_changed_after_the_judgement_hands_over_its_current_value(policy_counter, token, secret,
                                                                         make_grant):
    make_grant(secret=secret, inject_header="authorization")
    args = prepared_args(decide, _request(token))
    assert args[2].decision.verdict == "allow"
    secret_set(secret.name, "rotated-value-Kq2", kind="openai")
    answer = _in_group(args)
    assert [item["value"] for item in answer.inject] == ["rotated-value-Kq2"]


def test_a_run_ended_after_the_judgement_is_refused_for_its_token(token, live_run, make_grant):
    make_grant()
    args = prepared_args(decide, _request(token))
    run_set_status(live_run[0].pk, Run.Status.SUCCEEDED)
    assert _verdict(_in_group(args)) == ("deny", "bad_token")
    assert AuditRecord.objects.order_by("seq").last().reason == "bad_token"


def test_an_unknown_token_is_refused_and_recorded_under_the_lock(db, make_grant):
    make_grant()
    args = prepared_args(decide, _request("rt_not-a-token"))
    assert args[2] is None
    before = AuditRecord.objects.count()
    assert _verdict(_in_group(args)) == ("deny", "bad_token")
    assert AuditRecord.objects.count() == before + 1


def test_a_judgement_that_fails_is_made_under_the_lock(monkeypatch, token, make_grant):
    make_grant()

    def broken(_req):
        raise RuntimeError("policy cache down")

    monkeypatch.setattr(decide_module, "_judged_outside", broken)
    args = prepared_args(decide, _request(token))
    assert args[2] is None
    monkeypatch.undo()
    assert _verdict(_in_group(args)) == ("allow", "")


def test_the_database_thread_prepares_outside_any_transaction_and_groups_get_the_prepared_args():
    seen = []

    def prepare(value):
        seen.append(("prepare", connection.in_atomic_block, in_group()))
        return (f"{value}-prepared",)

    @groupable(prepare=prepare)
    def job(value):
        seen.append(("run", value, in_group()))
        return value

    async def scenario(committer):
        return await committer.run(job, "x")

    assert asyncio.run(scenario(GroupCommitter(max_group=8))) == "x-prepared"
    assert seen == [("prepare", False, False), ("run", "x-prepared", True)]


def test_a_group_that_rolls_back_runs_its_jobs_alone_on_their_own_args():
    seen = []

    @groupable(prepare=lambda value: (f"{value}-prepared",))
    def job(value):
        seen.append((value, in_group()))
        if in_group():
            raise RuntimeError("the group fails")
        return value

    async def scenario(committer):
        return await committer.run(job, "y")

    assert asyncio.run(scenario(GroupCommitter(max_group=8))) == "y"
    assert seen == [("y-prepared", True), ("y", False)]
