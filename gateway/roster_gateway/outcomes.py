"""Outcome reports, batched. An outcome only settles bytes (the control plane raised the run's taint when
it allowed the request), so nothing waits for one: the box's response never does, and neither does the
run's next decision. Reports queue here and go out as one POST /outcomes per batch, with one batch in
flight at a time, so under load batches grow instead of requests to the control plane."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine

from roster_gateway import metrics
from roster_gateway.client import ControlPlaneClient, ControlPlaneDown

log = logging.getLogger(__name__)

# {"decision_id", "status", "request_bytes", "response_bytes", "error", "scrubbed"} (docs/wire.md)
Outcome = dict


class OutcomeReporter:
    def __init__(self, client: ControlPlaneClient, *, max_batch: int, flush_delay: float,
                 spawn: Callable[[Coroutine], asyncio.Task | None]) -> None:
        self._client = client
        self._max_batch = max_batch
        self._flush_delay = flush_delay
        self._spawn = spawn
        self._queue: list[Outcome] = []
        self._full = asyncio.Event()
        self._sender: asyncio.Task | None = None

    def report(self, decision_id: str, status: int, request_bytes: int, response_bytes: int,
               error: str, scrubbed: int = 0, usage: dict | None = None) -> None:
        """`scrubbed`: echoes of the injected secret replaced in the response (the control plane audits
        a count above 0 as a tripwire). `usage`: a model call's usage as read from its response."""
        outcome = {"decision_id": decision_id, "status": status, "request_bytes": request_bytes,
                   "response_bytes": response_bytes, "error": error, "scrubbed": scrubbed}
        if usage is not None:
            outcome["usage"] = usage
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
            while self._queue:
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

    async def _send(self, batch: list[Outcome]) -> None:
        metrics.OUTCOME_BATCH.observe(len(batch))
        try:
            results = await self._client.outcomes(batch)
        except ControlPlaneDown as exc:
            metrics.OUTCOMES_LOST.inc(len(batch))
            log.warning("%d outcome(s) not reported: %s", len(batch), exc)
            return
        for outcome, result in zip(batch, results, strict=True):
            if result != "ok":
                metrics.OUTCOMES_LOST.inc()
                log.warning("outcome of %s: %s", outcome["decision_id"], result)
