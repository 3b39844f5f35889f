"""The process's listener on the approvals group (controlplane.egress.approval_wait.ApprovalWakeups), on
Channels' in-memory layer: it wakes only the waiters of the approval announced, wakes every waiter when
it joins or leaves (they then read the database again), and leaves the group when stopped. The same
listener on Redis, in a real server: tests/egress/test_approval_wakeups.py."""

from __future__ import annotations

import asyncio
import copy

import pytest
from channels.layers import get_channel_layer

from controlplane.approvals.broadcast import APPROVALS_GROUP
from controlplane.egress.approval_wait import ApprovalWakeups

SOON = 5.0
IDLE_PAST_THE_BLOCKING_POP = 7.0  # channels_redis pops with a 5 s timeout


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


@pytest.fixture
def redis_layer(settings, redis_url):
    """The production layer configuration (controlplane.settings), on the test Redis."""
    config = copy.deepcopy(settings.CHANNEL_LAYERS)
    config["default"]["CONFIG"]["hosts"][0]["address"] = redis_url
    settings.CHANNEL_LAYERS = config


@pytest.mark.integration
def test_an_idle_listener_stays_in_the_group_and_leaves_other_receivers_served(redis_layer):
    """Idle past the layer's blocking pop (5 s), the listener is still in the group (one join, no
    reconnect); meanwhile another receiver of the same process (a queue page's websocket in a web server)
    gets its messages."""
    async def scenario():
        wakeups = ApprovalWakeups()
        with wakeups.watching("a") as waiting:
            await _until(lambda: wakeups.live)
            layer = get_channel_layer()
            page = await layer.new_channel()
            await layer.group_add("queue-page-test", page)
            receiving = asyncio.ensure_future(layer.receive(page))
            await asyncio.sleep(0.2)
            await layer.group_send("queue-page-test", {"type": "page.update"})
            async with asyncio.timeout(SOON):
                assert (await receiving)["type"] == "page.update"
            await asyncio.sleep(IDLE_PAST_THE_BLOCKING_POP)
            assert wakeups.live and wakeups._joins == 1
            waiting.clear()
            await layer.group_send(APPROVALS_GROUP, _announce("a"))
            async with asyncio.timeout(SOON):
                await waiting.wait()
            await layer.group_discard("queue-page-test", page)
        await wakeups.stop()

    asyncio.run(scenario())
