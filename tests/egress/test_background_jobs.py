"""Background jobs on the gateway API's database thread (controlplane.egress.db_thread): a journaled call's
store runs after every other job queued with it, in its own order, never starves however busy the thread
is, and its failure is its caller's alone."""

import asyncio
import threading
import time

import pytest

from controlplane.egress import db_thread
from controlplane.egress.db_thread import GroupCommitter
from tests.egress.test_group_commit import _blocker

pytestmark = pytest.mark.django_db(transaction=True)


def _noting(order: list, name: str):
    def job():
        order.append(name)
        return name
    return job


def _behind_a_blocker(background: int, decisions: int) -> tuple[list[str], list[str], list[str]]:
    """`background` jobs queued, then `decisions` other jobs, all while a blocker holds the thread; then
    it lets go. (the order they ran in, the decisions' answers, the background jobs' answers)"""
    order: list[str] = []

    async def scenario(committer):
        gate = threading.Event()
        first = asyncio.ensure_future(committer.run(_blocker(gate)))
        await asyncio.sleep(0.05)  # the blocker holds the thread
        queued = [asyncio.ensure_future(committer.run(_noting(order, f"b{i}"), background=True))
                  for i in range(background)]
        await asyncio.sleep(0.01)
        waiting = [asyncio.ensure_future(committer.run(_noting(order, f"d{i}"))) for i in range(decisions)]
        await asyncio.sleep(0.05)
        gate.set()
        assert await first == "blocker"
        return await asyncio.gather(*waiting), await asyncio.gather(*queued)

    answered, stored = asyncio.run(scenario(GroupCommitter(max_group=64)))
    return order, answered, stored


def test_a_background_job_runs_after_the_jobs_queued_with_it_and_background_jobs_keep_their_order(
        monkeypatch):
    monkeypatch.setattr(db_thread, "BACKGROUND_MAX_WAIT_SECONDS", 60)  # none overdue, however slow the host
    order, answered, stored = _behind_a_blocker(3, 3)
    assert (answered, stored) == (["d0", "d1", "d2"], ["b0", "b1", "b2"])
    assert order == ["d0", "d1", "d2", "b0", "b1", "b2"]


def test_a_background_job_alone_runs_at_once():
    order: list[str] = []

    async def scenario(committer):
        return await asyncio.wait_for(committer.run(_noting(order, "only"), background=True), 5)

    assert asyncio.run(scenario(GroupCommitter(max_group=64))) == "only" and order == ["only"]


def test_a_background_job_does_not_starve_while_other_jobs_keep_coming(monkeypatch):
    monkeypatch.setattr(db_thread, "BACKGROUND_MAX_WAIT_SECONDS", 0.05)
    order: list[str] = []

    def busy(name):
        def job():
            order.append(name)
            time.sleep(0.005)  # each job holds the thread a little, as a decision does
            return name
        return job

    async def scenario(committer):
        async def keep_deciding():
            waiting, i = [], 0
            while "background" not in order and i < 2000:  # far more than the wait allows
                waiting.append(asyncio.ensure_future(committer.run(busy(f"d{i}"))))
                i += 1
                await asyncio.sleep(0.001)
            waiting += [asyncio.ensure_future(committer.run(busy(f"d{i + k}"))) for k in range(5)]
            return await asyncio.gather(*waiting)

        deciding = asyncio.ensure_future(keep_deciding())
        await asyncio.sleep(0.01)
        background = await committer.run(_noting(order, "background"), background=True)
        await deciding
        return background

    assert asyncio.run(scenario(GroupCommitter(max_group=64))) == "background"
    at = order.index("background")
    assert 0 < at < len(order) - 5  # it ran while jobs kept arriving, not after the last of them


def test_a_background_job_that_fails_hands_its_error_to_its_caller_only():
    def fails():
        raise RuntimeError("store failed")

    async def scenario(committer):
        results = await asyncio.gather(committer.run(fails, background=True),
                                       committer.run(lambda: "decided"),
                                       committer.run(lambda: "stored", background=True),
                                       return_exceptions=True)
        return results, await committer.run(lambda: "after")

    (failed, decided, stored), after = asyncio.run(scenario(GroupCommitter(max_group=64)))
    assert isinstance(failed, RuntimeError) and str(failed) == "store failed"
    assert (decided, stored, after) == ("decided", "stored", "after")


def test_overdue_background_jobs_take_turns_with_waiting_jobs_never_all_first(monkeypatch):
    monkeypatch.setattr(db_thread, "BACKGROUND_MAX_WAIT_SECONDS", 0)  # every background job is overdue
    order, answered, stored = _behind_a_blocker(5, 3)
    assert (answered, stored) == (["d0", "d1", "d2"], ["b0", "b1", "b2", "b3", "b4"])
    assert order == ["b0", "d0", "d1", "d2", "b1", "b2", "b3", "b4"]
