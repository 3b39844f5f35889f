"""Waiting for budget that calls in flight hold (issue 22: a cap that admits N calls one at a time admits
N at any concurrency). A model call reserves its worst case and gives back what it did not use when its
outcome settles, so under concurrency a cap's remainder is often only held, not spent. A call refused
only for that (the ledger's OverBudget.waitable) is decided again as outcomes settle, for at most
ROSTER_BUDGET_WAIT_MS; past it the refusal is recorded: 402, "held by N calls in flight".

The wait is on the decision API's event loop, between decisions: each try is an ordinary decision on the
database thread (controlplane.egress.db_thread), which holds no lock and no chain head while a call waits
and goes on serving every other request. A try that comes back held wrote nothing (controlplane.egress
.decide), so a waiting call leaves one audit record, its final decision, whatever the number of tries."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from django.conf import settings

from controlplane.egress.answer import EgressAnswer


class SettleSignal:
    """Wakes the calls waiting for budget when outcomes have settled in this process (outcomes another
    decision API process settled reach its waiters at their next poll, ROSTER_BUDGET_WAIT_POLL_MS; the
    database, never this signal, decides what a try admits). Each wake is a new
    generation: a waiter takes the current one before it tries, so an outcome that settles while its try
    runs wakes it at once rather than being missed."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    def current(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self._event is None or self._loop is not loop:
            self._loop, self._event = loop, asyncio.Event()
        return self._event

    def notify(self) -> None:
        """Outcomes settled (called on the event loop, after their commit)."""
        if self._event is not None:
            self._event.set()
            self._event = None


SETTLED = SettleSignal()


async def _until(event: asyncio.Event, seconds: float) -> None:
    if seconds <= 0:
        return
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        pass


async def decide_waiting(decide_once: Callable[[bool], Awaitable[EgressAnswer]]) -> EgressAnswer:
    """`decide_once(may_wait)` decides the request once (on the database thread); an answer that comes
    back `budget_held` is tried again after outcomes settle (or the poll), until the wait is over; the
    last try may not wait, so it is recorded whatever it is."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.ROSTER_BUDGET_WAIT_MS / 1000
    poll = settings.ROSTER_BUDGET_WAIT_POLL_MS / 1000
    while True:
        settled = SETTLED.current()
        answer = await decide_once(loop.time() < deadline)
        if not answer.budget_held:
            return answer
        await _until(settled, min(deadline - loop.time(), poll))
