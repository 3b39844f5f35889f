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


def _session_communicator(client) -> WebsocketCommunicator:
    """Through the real session and auth middleware, as a browser's socket is."""
    from channels.auth import AuthMiddlewareStack
    from channels.routing import URLRouter

    from controlplane.approvals.routing import websocket_urlpatterns

    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    return WebsocketCommunicator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)), "/ws/approvals/",
                                 headers=[(b"cookie", cookie)])


async def _push():
    await get_channel_layer().group_send(
        APPROVALS_GROUP, {"type": "approval.changed", "approval_id": "a2", "status": "approved"})


@pytest.mark.parametrize("revoke", ["sign_out", "role_removed", "deactivated"])
def test_a_socket_hears_nothing_once_its_user_may_no_longer_watch(approver, revoke):
    """Permission is checked again on every push, not only at connect: an open socket must not keep
    streaming the queue's changes to someone signed out or stripped of the role."""
    from asgiref.sync import sync_to_async
    from django.contrib.auth.models import Group
    from django.test import Client

    from controlplane.core.roles import APPROVERS
    from tests.web.conftest import PASSWORD

    client = Client()
    assert client.login(username=approver.username, password=PASSWORD)

    def do_revoke():
        if revoke == "sign_out":
            client.post("/accounts/logout/")
        elif revoke == "role_removed":
            approver.groups.remove(Group.objects.get(name=APPROVERS))
        else:
            approver.is_active = False
            approver.save()

    async def run():
        comm = _session_communicator(client)
        connected, _ = await comm.connect()
        assert connected
        await _push()
        assert await comm.receive_json_from(timeout=2) == {"approval_id": "a2", "status": "approved"}
        await sync_to_async(do_revoke)()
        await _push()
        message = await comm.receive_output(timeout=2)
        assert message["type"] == "websocket.close" and message.get("code") == 4403
        await comm.disconnect()
    async_to_sync(run)()
