"""The approval queue websocket: who may listen, and that a change reaches every listener."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from controlplane.approvals.broadcast import APPROVALS_GROUP
from controlplane.approvals.consumers import ApprovalQueueConsumer

pytestmark = pytest.mark.django_db(transaction=True)


def _communicator(user) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(ApprovalQueueConsumer.as_asgi(), "/ws/approvals/")
    comm.scope["user"] = user
    return comm


def test_anonymous_and_roleless_users_are_refused(nobody):
    async def run():
        for user in (AnonymousUser(), nobody):
            comm = _communicator(user)
            connected, code = await comm.connect()
            assert not connected and code == 4403
    async_to_sync(run)()


def test_every_approver_hears_a_change(approver, approver2, auditor):
    async def run():
        comms = [_communicator(u) for u in (approver, approver2, auditor)]
        for comm in comms:
            connected, _ = await comm.connect()
            assert connected
        await get_channel_layer().group_send(
            APPROVALS_GROUP, {"type": "approval.changed", "approval_id": "a1", "status": "approved"})
        for comm in comms:
            assert await comm.receive_json_from(timeout=2) == {"approval_id": "a1", "status": "approved"}
        await comms[0].send_json_to({"type": "approval.changed", "status": "forged"})
        assert await comms[1].receive_nothing(timeout=0.2)  # a page cannot broadcast to others
        for comm in comms:
            await comm.disconnect()
    async_to_sync(run)()
