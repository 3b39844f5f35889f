"""The gateway's long-poll on a held request's approval (POST /api/gateway/approvals/{id}/wait).

A decision releases the held request at once: every change of an approval is announced after its commit
on the approvals group of the channel layer (controlplane.approvals.broadcast; the live queue pages listen
there too), and this process keeps one listener in that group that wakes the waiters of the approval
named. An announcement only says "look now": the waiter reads the approval from the database, which
alone decides what happens, so a stray or forged wake-up releases nothing. Announcements can be lost (the
listener reconnecting, Redis restarting), so a waiter also reads the approval every
ROSTER_APPROVAL_RECHECK_SECONDS while the listener is in the group, every ROSTER_APPROVAL_POLL_SECONDS
while it is not, and at the approval's expiry, which nobody announces (docs/operations.md, "Approval
release")."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from channels.layers import get_channel_layer
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.utils import timezone
from ninja import Status

from controlplane.approvals.broadcast import APPROVALS_GROUP
from controlplane.approvals.models import Approval
from controlplane.approvals.selectors import approval_status
from controlplane.approvals.services import approval_mark_expired
from controlplane.egress.answer import Concluded
from controlplane.egress.conclude import approval_conclude
from controlplane.egress.db_thread import on_db_thread
from controlplane.egress.decide import policy_error_answer
from controlplane.egress.request import new_decision_id
from controlplane.egress.wire import answer_body, concluded_body

log = logging.getLogger(__name__)

# After losing the channel layer (Redis restarting), how long the listener waits before joining again.
LISTENER_RETRY_SECONDS = 1.0
# An approval's expiry is read from the clock of the database row; look a moment after it, not before.
EXPIRY_SLACK_SECONDS = 0.01


@dataclass(frozen=True)
class _Pending:
    expires_at: datetime


def _look(approval_id: uuid.UUID) -> _Pending | Concluded | None:
    """One database visit: the approval's state, concluded at once when it has left "pending" (so a
    woken waiter costs one trip to the database thread, not two). None: no such approval."""
    row = approval_status(approval_id)
    if row is None:
        return None
    status, expires_at = row
    if status == Approval.Status.PENDING and expires_at <= timezone.now():
        approval_mark_expired(approval_id)
        status = Approval.Status.EXPIRED
    if status == Approval.Status.PENDING:
        return _Pending(expires_at)
    return approval_conclude(approval_id)


class ApprovalWakeups:
    """This process's listener on the approvals group and the waiters it wakes, on one event loop."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._listener: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.live = False  # in the group now: an announcement made now reaches this process
        self._joins = 0

    @contextlib.contextmanager
    def watching(self, approval_id: str):
        """An event set whenever the approval may have changed (or the listener joined or left)."""
        self._ensure_listening()
        event = asyncio.Event()
        self._waiters[approval_id].add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(approval_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[approval_id]

    def wake(self, approval_id: str | None = None) -> None:
        """Wake the approval's waiters; None wakes every waiter (each then reads its approval again)."""
        if approval_id is None:
            groups = list(self._waiters.values())
        else:
            groups = [self._waiters.get(approval_id, ())]
        for events in groups:
            for event in events:
                event.set()

    def start(self) -> None:
        """Join the group now (the decision API's startup), so the first held request is announced too."""
        self._ensure_listening()

    async def stop(self) -> None:
        """Leave the group (the decision API's shutdown): a member that never leaves stays in the group,
        and is sent every announcement, until the layer's group expiry."""
        listener, self._listener = self._listener, None
        if listener is not None and not listener.done():
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener

    def _ensure_listening(self) -> None:
        loop = asyncio.get_running_loop()
        if self._listener is not None and not self._listener.done() and self._loop is loop:
            return
        self._loop = loop
        self.live = False
        self._listener = loop.create_task(self._listen(), name="approval-wakeups")

    async def _listen(self) -> None:
        layer = get_channel_layer()
        if layer is None:
            log.warning("no channel layer: held requests are released by polling only")
            return
        failing = False  # said once per outage, not once per retry
        while True:
            joins = self._joins
            try:
                await self._session(layer)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the polls carry on; join again shortly
                if not failing or self._joins != joins:
                    log.warning("approval announcements unavailable (%s); held requests are released by "
                                "polling every %ss until they are back", type(exc).__name__,
                                settings.ROSTER_APPROVAL_POLL_SECONDS)
                failing = True
            await asyncio.sleep(LISTENER_RETRY_SECONDS)

    async def _session(self, layer) -> None:
        # The layer's default prefix: a process's channels share one queue in Redis, read by whichever of
        # its receivers holds the layer's lock; a channel under another prefix would leave the websocket
        # consumers of a web server (which serves the gateway API too) unread while this one waits.
        channel = await layer.new_channel()
        await layer.group_add(APPROVALS_GROUP, channel)
        receiving = asyncio.create_task(self._receive(layer, channel))
        rejoining = asyncio.create_task(self._stay_joined(layer, channel))
        try:
            self.live = True
            self._joins += 1
            self.wake()  # anything announced before we joined: every waiter looks again
            done, _ = await asyncio.wait((receiving, rejoining), return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            self.live = False
            self.wake()  # waiters switch to the short poll until we are back
            for task in (receiving, rejoining):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(layer.group_discard(APPROVALS_GROUP, channel), LISTENER_RETRY_SECONDS)

    async def _receive(self, layer, channel: str) -> None:
        while True:
            message = await layer.receive(channel)
            self.wake(str(message.get("approval_id", "")))

    @staticmethod
    async def _stay_joined(layer, channel: str) -> None:
        # The layer drops a group member that has not re-joined within its group expiry (a day).
        every = max(60.0, getattr(layer, "group_expiry", 86400) / 4)
        while True:
            await asyncio.sleep(every)
            await layer.group_add(APPROVALS_GROUP, channel)


wakeups = ApprovalWakeups()


def _next_look(pending: _Pending, remaining: float, live: bool) -> float:
    every = settings.ROSTER_APPROVAL_RECHECK_SECONDS if live else settings.ROSTER_APPROVAL_POLL_SECONDS
    until_expiry = (pending.expires_at - timezone.now()).total_seconds() + EXPIRY_SLACK_SECONDS
    return max(0.0, min(every, remaining, until_expiry))


async def wait_for_approval(request, approval_id: uuid.UUID, timeout_seconds: int) -> Status:
    """EgressAnswer as soon as the approval leaves "pending", or "pending" when the timeout is over. Holds no
    thread and no transaction while waiting."""
    deadline = time.monotonic() + min(timeout_seconds, settings.ROSTER_APPROVAL_WAIT_MAX_SECONDS)
    # Announcements need this process's long-lived event loop (the servers'); elsewhere (Django's test
    # client runs each request on a loop of its own) the wait polls.
    announced = isinstance(request, ASGIRequest)
    with wakeups.watching(str(approval_id)) if announced else contextlib.nullcontext() as woken:
        while True:
            if woken is not None:
                woken.clear()  # before the read: an announcement arriving during it is not missed
            try:
                state = await on_db_thread(request, _look, approval_id)
            except Exception as exc:  # noqa: BLE001 - a failure while waiting is a deny, never a bare 500
                log.error("waiting on approval %s failed: %s", approval_id, type(exc).__name__)
                answer = await on_db_thread(request, policy_error_answer, new_decision_id(), "", "")
                return Status(200, {"status": "expired", "decision": answer_body(answer)})
            if state is None:
                return Status(404, {"detail": "no such approval"})
            if isinstance(state, Concluded):
                return Status(200, concluded_body(state))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return Status(200, {"status": "pending", "decision": None})
            pause = _next_look(state, remaining, woken is not None and wakeups.live)
            if woken is None:
                await asyncio.sleep(pause)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await woken.wait()
