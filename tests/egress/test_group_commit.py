"""The gateway API's database thread (controlplane.egress.db_thread): jobs that arrive together share one
transaction, each answer is released only after the commit that made it durable, and a group with any
failure rolls back whole and each job runs again alone."""

import asyncio
import threading

import pytest
from django.db import connection, transaction

from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append, audit_write
from controlplane.audit.verify import verify_database
from controlplane.egress.db_thread import GroupCommitter, groupable, in_group

pytestmark = pytest.mark.django_db(transaction=True)


def _blocker(gate: threading.Event):
    """A job run alone that holds the thread until `gate` opens, so the jobs queued meanwhile form a group."""
    def block():
        gate.wait(10)
        return "blocker"
    return block


def _grouped_append(name: str, seen: dict):
    def job():
        record = audit_append("decision", {"job": name})
        committed = seen.setdefault(name, {"committed": False})
        committed["outer"] = connection.atomic_blocks[0] if connection.atomic_blocks else None
        transaction.on_commit(lambda: committed.update(committed=True))
        return name, record.seq
    return job


def _alone_append(name: str):
    def job():
        record = audit_append("decision", {"job": name, "alone": True})
        return f"{name}-alone", record.seq
    return job


def _job(alone, grouped):
    """A groupable job that shows which way it ran: `grouped` inside a group, `alone` otherwise."""
    @groupable
    def job():
        return grouped() if in_group() else alone()
    return job


async def _run_group(committer, jobs):
    gate = threading.Event()
    first = asyncio.ensure_future(committer.run(_blocker(gate)))
    await asyncio.sleep(0.05)  # the blocker now holds the thread
    waiting = [asyncio.ensure_future(committer.run(_job(alone, grouped))) for alone, grouped in jobs]
    await asyncio.sleep(0.05)  # every job is queued behind it
    gate.set()
    assert await first == "blocker"
    return await asyncio.gather(*waiting)


def test_jobs_queued_together_share_one_transaction_in_arrival_order():
    seen: dict = {}
    names = [f"j{i}" for i in range(6)]
    jobs = [(_alone_append(n), _grouped_append(n, seen)) for n in names]
    results = asyncio.run(_run_group(GroupCommitter(max_group=64), jobs))
    assert [name for name, _ in results] == names  # each its grouped answer
    seqs = [seq for _, seq in results]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # the chain in arrival order
    assert all(seen[n]["outer"] is seen["j0"]["outer"] for n in names) and seen["j0"]["outer"] is not None
    # every answer was released after its commit
    assert all(seen[n]["committed"] for n in names)
    assert verify_database().ok


def test_max_group_bounds_a_group():
    seen: dict = {}
    names = [f"k{i}" for i in range(5)]
    jobs = [(_alone_append(n), _grouped_append(n, seen)) for n in names]
    results = asyncio.run(_run_group(GroupCommitter(max_group=2), jobs))
    outers = [seen[n]["outer"] for n in names]
    # groups of at most two: k0+k1 and k2+k3 share one transaction each; k4 is a group of its own
    assert outers[0] is outers[1] and outers[2] is outers[3]
    assert outers[1] is not outers[2] and outers[4] is not outers[3]
    assert [name for name, _ in results] == names
    assert verify_database().ok


def test_a_failing_job_rolls_the_group_back_and_every_job_runs_alone():
    seen: dict = {}

    def broken():
        audit_append("decision", {"job": "broken"})
        raise RuntimeError("boom")

    jobs = [(_alone_append("a"), _grouped_append("a", seen)),
            (_alone_append("b"), broken),
            (_alone_append("c"), _grouped_append("c", seen))]
    results = asyncio.run(_run_group(GroupCommitter(max_group=64), jobs))
    assert [name for name, _ in results] == ["a-alone", "b-alone", "c-alone"]
    bodies = list(AuditRecord.objects.order_by("seq").values_list("body", flat=True))
    # nothing of the rolled-back group survives: only the three alone runs, once each, in order
    assert len(bodies) == 3 and all('"alone":true' in body for body in bodies)
    assert not seen["a"]["committed"] and "c" not in seen  # c never ran inside the doomed group
    assert verify_database().ok


def test_a_statement_the_database_refuses_rolls_the_group_back_with_its_held_records():
    """A write the database refuses (here a second record at a stored seq), which on PostgreSQL's
    pipeline (prepared statements: the decision API's own settings) is only known at the group's end:
    the group still rolls back whole, the records held for its one INSERT with it, and each job runs
    again alone."""
    stored = audit_append("decision", {"job": "setup"})
    columns = ("seq, created_at, kind, run_id_ref, worker_name, verdict, reason, body, prev_hash, hash")

    def refused():
        audit_write("decision", {"job": "refused"})
        with connection.cursor() as cur:
            cur.execute(f"INSERT INTO {AuditRecord._meta.db_table} ({columns}) "
                        "VALUES (%s, %s, 'decision', NULL, '', '', '', '{}', %s, %s)",
                        [stored.seq, stored.created_at, stored.prev_hash, "f" * 64])
        return "refused-ran"

    def refused_alone():
        with transaction.atomic():  # alone, in its own transaction, as decide() runs alone
            refused()

    seen: dict = {}
    jobs = [(_alone_append("a"), _grouped_append("a", seen)),
            (refused_alone, refused),
            (_alone_append("c"), _grouped_append("c", seen))]

    async def scenario(committer):
        return await _run_group_with_errors(committer, jobs)

    results = asyncio.run(scenario(GroupCommitter(max_group=64)))
    assert results[0][0] == "a-alone" and results[2][0] == "c-alone"
    assert not isinstance(results[1], str)  # refused alone too, and told to its caller
    bodies = list(AuditRecord.objects.order_by("seq").values_list("body", flat=True))
    assert len(bodies) == 3 and '"setup"' in bodies[0] and all('"alone":true' in b for b in bodies[1:])
    assert not any('"refused"' in b for b in bodies) and not seen["a"]["committed"]
    assert verify_database().ok


async def _run_group_with_errors(committer, jobs):
    gate = threading.Event()
    first = asyncio.ensure_future(committer.run(_blocker(gate)))
    await asyncio.sleep(0.05)
    waiting = [asyncio.ensure_future(committer.run(_job(alone, grouped))) for alone, grouped in jobs]
    await asyncio.sleep(0.05)
    gate.set()
    await first
    return await asyncio.gather(*waiting, return_exceptions=True)


def test_a_job_that_fails_alone_hands_its_error_to_its_caller_only():
    def fails():
        raise ValueError("bad")

    async def scenario(committer):
        bad = committer.run(fails)
        good = committer.run(_alone_append("ok"))
        return await asyncio.gather(bad, good, return_exceptions=True)

    bad, good = asyncio.run(scenario(GroupCommitter(max_group=64)))
    assert isinstance(bad, ValueError) and good[0] == "ok-alone"


def test_an_on_commit_failure_after_the_commit_does_not_run_the_group_twice():
    seen: dict = {}

    def grouped_with_failing_callback():
        audit_append("decision", {"job": "cb"})

        def fail():
            raise RuntimeError("broadcast down")
        transaction.on_commit(fail)
        return "cb", 0

    jobs = [(_alone_append("x"), _grouped_append("x", seen)),
            (_alone_append("cb"), grouped_with_failing_callback)]
    results = asyncio.run(_run_group(GroupCommitter(max_group=64), jobs))
    assert [name for name, _ in results] == ["x", "cb"]
    assert AuditRecord.objects.count() == 2  # committed once, not redone alone


def test_a_caller_that_went_away_does_not_stop_the_thread():
    async def scenario(committer):
        gate = threading.Event()
        first = asyncio.ensure_future(committer.run(_blocker(gate)))
        await asyncio.sleep(0.05)
        gone = asyncio.ensure_future(committer.run(_alone_append("gone")))
        await asyncio.sleep(0.01)
        gone.cancel()
        gate.set()
        await first
        return await committer.run(_alone_append("after"))

    assert asyncio.run(scenario(GroupCommitter(max_group=64)))[0] == "after-alone"


def test_a_statement_the_database_no_longer_supports_replaces_the_connection():
    # As PostgreSQL answers a prepared statement whose table a migration changed, on that connection
    # until it is replaced; any other failure keeps the thread's connection.
    from django.db import NotSupportedError

    def fails(kind):
        def job():
            connection.ensure_connection()
            raise kind("cached plan must not change result type")
        return job

    async def scenario(committer):
        for kind, dropped in ((NotSupportedError, True), (RuntimeError, False)):
            with pytest.raises(kind):
                await committer.run(fails(kind))
            assert await committer.run(lambda: connection.connection is None) is dropped
        assert await committer.run(lambda: AuditRecord.objects.count()) == 0  # connects again

    asyncio.run(scenario(GroupCommitter(max_group=64)))


def test_a_job_not_marked_groupable_always_runs_alone():
    seen = []

    def plain():
        seen.append(in_group())
        return "plain"

    async def scenario(committer):
        gate = threading.Event()
        first = asyncio.ensure_future(committer.run(_blocker(gate)))
        await asyncio.sleep(0.05)
        waiting = [asyncio.ensure_future(committer.run(plain)) for _ in range(3)]
        await asyncio.sleep(0.05)
        gate.set()
        await first
        return await asyncio.gather(*waiting)

    assert asyncio.run(scenario(GroupCommitter(max_group=64))) == ["plain"] * 3
    assert seen == [False, False, False]


def test_one_decide_raises_in_a_group_and_denies_alone(monkeypatch, token, secret, make_grant):
    """The same decide(): in a group a failure raises (the group rolls back and the request is decided
    again alone); alone it is a policy_error deny, audited."""
    from controlplane.egress import allow
    from controlplane.egress.db_thread import as_group
    from controlplane.egress.decide import decide
    from controlplane.egress.gateway_calls import egress_request
    from controlplane.egress.schemas import DecideIn
    from tests.egress.fixtures import decide_body

    make_grant(secret=secret, inject_header="authorization")
    req = egress_request(DecideIn.model_validate(decide_body(token)))
    with as_group():
        assert decide(req).decision.verdict == "allow"

    def boom(*_a, **_k):
        raise RuntimeError("ledger down")

    monkeypatch.setattr(allow, "reserve", boom)
    with pytest.raises(RuntimeError), as_group():
        decide(req)
    assert not in_group()
    answer = decide(req)
    assert (answer.decision.verdict, answer.decision.reason) == ("deny", "policy_error")
    assert AuditRecord.objects.order_by("seq").last().reason == "policy_error"
