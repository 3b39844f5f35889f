"""Outcome reports, batched. An outcome only settles bytes (the control plane raised the run's taint when
it allowed the request), so nothing waits for one: the box's response never does, and neither does the
run's next decision. Reports queue here and go out as one POST /outcomes per batch, with one batch in
flight at a time, so under load batches grow instead of requests to the control plane.

A report is kept (roster_gateway.outcome_journal, on disk) until the control plane has answered for it: a
control plane that is down or crashed mid-batch gets the batch again, after a pause, until it takes it;
a gateway killed with reports queued sends them when it starts again. Settling is idempotent on the
control plane's side (a second report of a settled decision is "already_settled"), so sending twice
never charges twice."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine

from roster_gateway import metrics
from roster_gateway.client import ControlPlaneClient, ControlPlaneDown
from roster_gateway.outcome_journal import OutcomeJournal

log = logging.getLogger(__name__)

# {"decision_id", "status", "request_bytes", "response_bytes", "error", "scrubbed", ["usage"],
#  ["response_sha256"]} (docs/wire.md)
Outcome = dict
# Results after which the control plane has nothing more to settle for that outcome.
DONE = frozenset({"ok", "unknown", "already_settled"})
# An outcome the control plane answered with a failure of its own ("error") this many times is given up
# (logged, counted): it must not hold back every later batch. One it never answered is kept for good.
MAX_REFUSED_TRIES = 5


class OutcomeReporter:
    def __init__(self, client: ControlPlaneClient, *, max_batch: int, flush_delay: float,
                 spawn: Callable[[Coroutine], asyncio.Task | None], journal: OutcomeJournal | None = None,
                 retry_delay: float = 1.0) -> None:
        self._client = client
        self._journal = journal or OutcomeJournal(None)
        self._retry_delay = retry_delay
        self._stopping = asyncio.Event()
        self._failed: dict[str, int] = {}
        self._max_batch = max_batch
        self._flush_delay = flush_delay
        self._spawn = spawn
        self._queue: list[Outcome] = []
        self._full = asyncio.Event()
        self._sender: asyncio.Task | None = None
        self._queue.extend(self._journal.take_recovered())

    def resume(self) -> None:
        """Send what a previous run (or a stop) left unacknowledged (call once the event loop runs)."""
        self._stopping.clear()
        if self._queue and self._sender is None:
            self._sender = self._spawn(self._send_all())

    def stop(self) -> None:
        """Stop retrying (shutdown): what is unacknowledged stays in the journal for the next start."""
        self._stopping.set()

    def report(self, decision_id: str, status: int, request_bytes: int, response_bytes: int,
               error: str, scrubbed: int = 0, usage: dict | None = None,
               response_sha256: str | None = None) -> None:
        """`scrubbed`: echoes of the injected secret replaced in the response (the control plane audits
        a count above 0 as a tripwire). `usage`: a model call's usage as read from its response.
        `response_sha256`: the digest of the response body as the upstream sent it (the client leaves it
        out for a control plane that does not take it)."""
        outcome = {"decision_id": decision_id, "status": status, "request_bytes": request_bytes,
                   "response_bytes": response_bytes, "error": error, "scrubbed": scrubbed}
        if usage is not None:
            outcome["usage"] = usage
        if response_sha256:
            outcome["response_sha256"] = response_sha256
        self._journal.add(outcome)
        self._queue.append(outcome)
        if len(self._queue) >= self._max_batch:
            self._full.set()
        if self._sender is None:
            self._sender = self._spawn(self._send_all())

    @property
    def queued(self) -> int:
        return len(self._queue)

    async def _send_all(self) -> None:
        try:
            while self._queue and not self._stopping.is_set():
                if len(self._queue) < self._max_batch and self._flush_delay > 0:
                    # Gather what else finishes within the delay (the first report waits at most that).
                    self._full.clear()
                    try:
                        async with asyncio.timeout(self._flush_delay):
                            await self._full.wait()
                    except TimeoutError:
                        pass
                batch, self._queue = self._queue[:self._max_batch], self._queue[self._max_batch:]
                await self._send(batch)
        finally:
            self._sender = None

    async def _post(self, batch: list[Outcome]) -> list[str]:
        """One batch to the control plane; one result per report (the journal reporter posts elsewhere)."""
        return await self._client.outcomes(batch)

    async def _send(self, batch: list[Outcome]) -> None:
        metrics.OUTCOME_BATCH.observe(len(batch))
        try:
            results = await self._post(batch)
        except ControlPlaneDown as exc:
            metrics.OUTCOMES_LOST.inc(len(batch))
            log.warning("%d outcome(s) not reported yet (kept, sent again): %s", len(batch), exc)
            await self._retry_later(batch)
            return
        again, done = [], []
        for outcome, result in zip(batch, results, strict=True):
            decision_id = outcome["decision_id"]
            if result != "ok":
                metrics.OUTCOMES_LOST.inc()
                log.warning("outcome of %s: %s", decision_id, result)
            tries = self._failed.pop(decision_id, 0) + 1
            if result not in DONE and tries < MAX_REFUSED_TRIES:
                self._failed[decision_id] = tries
                again.append(outcome)
            else:
                done.append(decision_id)
        self._journal.ack(done)
        if again:
            await self._retry_later(again)

    async def _retry_later(self, batch: list[Outcome]) -> None:
        self._queue[:0] = batch  # first again: oldest reports first
        try:
            async with asyncio.timeout(self._retry_delay):
                await self._stopping.wait()
        except TimeoutError:
            pass
