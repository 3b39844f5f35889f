"""The process's listener on the approvals group (controlplane.egress.approval_wait.ApprovalWakeups), on
Channels' in-memory layer: it wakes only the waiters of the approval announced, wakes every waiter when
it joins or leaves (they then read the database again), and leaves the group when stopped. The same
listener on Redis, in a real server: tests/egress/test_approval_wakeups.py."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import get_channel_layer

from controlplane.approvals.broadcast import APPROVALS_GROUP
from controlplane.egress.approval_wait import ApprovalWakeups

SOON = 5.0


@pytest.fixture
def in_memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


async def _until(condition) -> None:
    async with asyncio.timeout(SOON):
        while not condition():
            await asyncio.sleep(0.01)


def _announce(approval_id: str, status: str = "approved") -> dict:
    return {"type": "approval.changed", "approval_id": approval_id, "status": status}


def test_an_announcement_wakes_only_the_waiters_of_its_approval(in_memory_layer):
    async def scenario():
        wakeups = ApprovalWakeups()
        wakeups.start()
        layer = get_channel_layer()
        with wakeups.watching("a") as first, wakeups.watching("a") as second, wakeups.watching("b") as other:
            await _until(lambda: wakeups.live)
            assert first.is_set() and other.is_set()  # joining wakes everyone: they look again
            for event in (first, second, other):
                event.clear()
            await layer.group_send(APPROVALS_GROUP, _announce("a"))
            async with asyncio.timeout(SOON):
                await first.wait()
                await second.wait()
            await asyncio.sleep(0.05)
            assert not other.is_set()
            await layer.group_send(APPROVALS_GROUP, {"type": "approval.changed"})  # malformed: wakes nobody
            await asyncio.sleep(0.05)
            assert not other.is_set()
        assert not wakeups._waiters  # nothing kept for a wait that ended
        await wakeups.stop()
        assert not wakeups.live
        assert not layer.groups.get(APPROVALS_GROUP)  # left the group: no announcement is sent to it

    asyncio.run(scenario())


def test_leaving_the_group_wakes_every_waiter(in_memory_layer):
    async def scenario():
        wakeups = ApprovalWakeups()
        with wakeups.watching("a") as waiting:
            await _until(lambda: wakeups.live)
            waiting.clear()
            await wakeups.stop()
            assert waiting.is_set() and not wakeups.live  # back to the short poll at once

    asyncio.run(scenario())


def test_without_a_channel_layer_nobody_is_woken_and_the_waits_poll(settings):
    settings.CHANNEL_LAYERS = {}

    async def scenario():
        wakeups = ApprovalWakeups()
        with wakeups.watching("a") as waiting:
            await asyncio.sleep(0.05)
            assert not wakeups.live and not waiting.is_set()
        await wakeups.stop()

    asyncio.run(scenario())
