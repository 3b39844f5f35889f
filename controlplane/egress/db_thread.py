"""Where the gateway API's blocking work runs: one database thread with a long-lived connection, which
commits decisions and outcomes that arrive together as one group (docs/operations.md, "Group commit").

Every write here appends to the audit chain, which admits one writer at a time (SQLite's write lock,
PostgreSQL's advisory lock), so more threads would only add lock contention. One thread serves the
jobs in arrival order instead; while it works, new jobs queue, and the next turn takes them all. (A
decision API of several processes has one such thread in each; their groups take the chain's lock in
turn: docs/operations.md, "Decision API processes".)

A group is one transaction: its jobs run one after another inside it, exactly as they would alone (the
chain is appended in arrival order, budgets are reserved against everything before them), and every
answer is released only after the commit that made its records durable. If anything in a group fails,
the whole group rolls back and each job runs again on its own, in its own transactions, as if no group
had been tried: no answer is ever released for work that was rolled back.

A background job (`background=True`: a journaled call's store, which nothing waits on) runs only when no
other job is queued, or once it has waited BACKGROUND_MAX_WAIT_SECONDS, so a decision arriving while
model calls' journals are stored waits at most for the one being stored (docs/operations.md, "Group
commit").

Callers see none of this: a route awaits `on_db_thread(request, fn, *args)`. A service function marked
`@groupable` may be run in a group; it asks `in_group()` to know whether it is inside one (then it raises on
any failure, so the group rolls back and the function runs again alone)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import NotSupportedError, connection, transaction

from controlplane.audit.services import lock_chain_head
from controlplane.core.db import current_connection, pipelined
from controlplane.core.held_rows import holding
from controlplane.egress.sqlite_turn import turn

log = logging.getLogger(__name__)


# A background job that waited this long runs before the next group (no job starves under load).
BACKGROUND_MAX_WAIT_SECONDS = 0.25
_WAKE = object()  # put on the job queue when a background job is added: the thread looks again
_GROUPABLE = "_roster_db_thread_groupable"
_PREPARE = "_roster_db_thread_prepare"
_here = threading.local()


def groupable(fn: Callable | None = None, *, prepare: Callable | None = None) -> Callable:
    """Marks a service function whose work may share a group's transaction with other jobs. It must give
    the same answer in a group as alone for the same state, and raise on any failure while in_group().
    `prepare(*args)`: work the job can do before the group takes the chain's lock, outside any transaction
    (docs/operations.md, "Decision API processes": another process may hold the lock meanwhile); it
    returns the arguments the job is then called with in the group, and must not raise. Alone, the job
    is called with its own arguments."""
    def mark(function: Callable) -> Callable:
        setattr(function, _GROUPABLE, True)
        setattr(function, _PREPARE, prepare)
        return function
    return mark if fn is None else mark(fn)


def in_group() -> bool:
    """Whether the code running now is one job of a group, inside the group's one transaction."""
    return getattr(_here, "grouped", False)


def prepared_args(fn: Callable, *args) -> tuple:
    """The arguments a groupable `fn` is called with in a group: its prepare()'s, made now (before any
    lock: the decision API's database thread calls this outside a transaction), or its own."""
    prepare = getattr(fn, _PREPARE, None)
    return args if prepare is None else prepare(*args)


@contextlib.contextmanager
def as_group() -> Iterator[None]:
    """One transaction for the jobs run inside it, each seeing in_group() (also what the decision profile,
    bench/profile_decision.py, runs its groups in)."""
    with transaction.atomic():
        # The chain's lock before the first job reads anything: every job appends to the chain anyway,
        # and another decision API process (--processes) may be writing the runs, budgets and approvals
        # this group reads; under the lock each job reads them as the chain's order has them. SQLite's
        # IMMEDIATE transaction holds the write lock already; on PostgreSQL this is the advisory lock.
        lock_chain_head()
        _here.grouped = True
        try:
            # The group's audit records, spend lines and run decisions go in as one INSERT per table at
            # its end (controlplane.core.held_rows).
            with pipelined(), holding(current_connection()):
                yield
        finally:
            _here.grouped = False


@dataclass(frozen=True)
class _Job:
    fn: Callable
    args: tuple
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future

    @property
    def groupable(self) -> bool:
        return getattr(self.fn, _GROUPABLE, False)

    def prepared_args(self) -> tuple:
        return prepared_args(self.fn, *self.args)


def _ensure_healthy_connection() -> None:
    # The thread keeps its database connection between jobs (no connect per decision); one that saw
    # errors and no longer answers is dropped so the next statement reconnects.
    if connection.connection is not None and connection.errors_occurred and not connection.is_usable():
        connection.close()


def _drop_connection_after(error: BaseException) -> None:
    # A prepared statement whose table changed under it (a migration while the decision API runs) keeps
    # failing on this connection ("cached plan must not change result type") until the connection is
    # replaced; the next job reconnects with none prepared (docs/operations.md, prepared statements).
    if isinstance(error, NotSupportedError):
        connection.close()


def _deliver(future: asyncio.Future, result=None, error: BaseException | None = None) -> None:
    if future.done():  # the caller went away (a gateway that gave up); its work stands, unanswered
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class GroupCommitter:
    """The gateway API's database thread. `run` queues a job and waits for its answer."""

    def __init__(self, max_group: int):
        self.max_group = max_group
        self._jobs: queue.SimpleQueue[_Job | object] = queue.SimpleQueue()
        # (queued at, job), oldest first; appended by event loops, taken by the database thread
        self._background: collections.deque[tuple[float, _Job]] = collections.deque()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    async def run(self, fn: Callable, *args, background: bool = False):
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._ensure_started()
        job = _Job(fn, args, loop, future)
        if background:
            self._background.append((time.monotonic(), job))
            self._jobs.put(_WAKE)
        else:
            self._jobs.put(job)
        return await future

    def _ensure_started(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="gateway-db", daemon=True)
                self._thread.start()

    def _serve(self) -> None:
        background_last = False
        while True:
            # An overdue background job goes before the queued jobs, but never two in a row: a backlog of
            # them (a gateway sending what it kept across a restart) takes turns with the decisions.
            if self._background and (self._jobs.empty() or (self._background_overdue()
                                                            and not background_last)):
                self._run_background()
                background_last = True
                continue
            background_last = False
            first = self._jobs.get()
            jobs = [] if first is _WAKE else [first]
            while len(jobs) < self.max_group:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not _WAKE:
                    jobs.append(job)
            if not jobs:
                continue  # only wake-ups: the loop's first check runs the background job
            grouped_args = self._prepare(jobs)
            with turn():  # SQLite: the decision API's processes hand the write lock on at once
                self._run_in_order(jobs, grouped_args)

    def _background_overdue(self) -> bool:
        return time.monotonic() - self._background[0][0] >= BACKGROUND_MAX_WAIT_SECONDS

    def _run_background(self) -> None:
        _queued, job = self._background.popleft()
        with turn():
            self._run_alone(job)

    @staticmethod
    def _prepare(jobs: list[_Job]) -> dict[int, tuple]:
        """Each groupable job's arguments for its group, prepared before any lock is taken."""
        prepared = {}
        for job in jobs:
            if job.groupable:
                try:
                    _ensure_healthy_connection()
                    prepared[id(job)] = job.prepared_args()
                except Exception as exc:  # noqa: BLE001 - unprepared, the job does all its work in the group
                    log.warning("preparing a job failed (%s); it runs unprepared", type(exc).__name__)
        return prepared

    def _run_in_order(self, jobs: list[_Job], grouped_args: dict[int, tuple]) -> None:
        """Consecutive groupable jobs form one group; any other job runs alone between groups."""
        group: list[_Job] = []
        for job in jobs:
            if job.groupable:
                group.append(job)
                continue
            self._run_group(group, grouped_args)
            group = []
            self._run_alone(job)
        self._run_group(group, grouped_args)

    def _run_alone(self, job: _Job) -> None:
        try:
            _ensure_healthy_connection()
            result = job.fn(*job.args)
        except Exception as exc:  # noqa: BLE001 - handed to the waiting request, which answers for it
            _drop_connection_after(exc)
            job.loop.call_soon_threadsafe(_deliver, job.future, None, exc)
            return
        job.loop.call_soon_threadsafe(_deliver, job.future, result)

    def _run_group(self, group: list[_Job], grouped_args: dict[int, tuple]) -> None:
        # A group of one too: its single transaction reads the run once, inside the write lock, and may
        # use the policy cache, which the job alone, judging before its transaction, cannot.
        if not group:
            return
        committed = []
        try:
            _ensure_healthy_connection()
            with as_group():
                # Registered first, so it runs first after the commit: a later on-commit callback that
                # fails (a live-queue broadcast) must not make this group's durable work run twice.
                transaction.on_commit(lambda: committed.append(True))
                results = [job.fn(*grouped_args.get(id(job), job.args)) for job in group]
        except Exception as exc:  # noqa: BLE001 - the group is rolled back; each job is redone alone
            if not committed:
                log.warning("group commit of %d jobs rolled back (%s); running each on its own",
                            len(group), type(exc).__name__)
                for job in group:
                    self._run_alone(job)
                return
            log.error("after a group commit of %d jobs: %s", len(group), type(exc).__name__)
        for job, result in zip(group, results, strict=True):
            job.loop.call_soon_threadsafe(_deliver, job.future, result)


_committer = GroupCommitter(max_group=settings.ROSTER_GROUP_COMMIT_MAX)


async def on_db_thread(request, fn: Callable, *args, background: bool = False):
    """Run blocking service code: under ASGI (daphne, uvicorn; `request` an ASGIRequest, or None for a
    caller with no Django request) on the gateway API's database thread, in a group when `fn` is
    groupable and other jobs wait with it, after every other queued job when `background`; under WSGI
    (the test client) in the request's own thread, which already is that, alone."""
    if request is None or isinstance(request, ASGIRequest):
        return await _committer.run(fn, *args, background=background)

    def call():
        _ensure_healthy_connection()
        return fn(*args)
    return await sync_to_async(call, thread_sensitive=True)()
