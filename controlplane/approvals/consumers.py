"""The approval queue's websocket. It carries only "something changed" (approval id and status); the page
then fetches the server-rendered list over HTTP, so nothing from a box ever travels through here as
markup, and the same permission checks as the page apply."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from controlplane.approvals.broadcast import APPROVALS_GROUP

VIEW_PERM = "approvals.view_approval"


@database_sync_to_async
def _may_watch(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active and user.has_perm(VIEW_PERM))


class ApprovalQueueConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        if not await _may_watch(self.scope.get("user")):
            await self.close(code=4403)
            return
        await self.channel_layer.group_add(APPROVALS_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        await self.channel_layer.group_discard(APPROVALS_GROUP, self.channel_name)

    async def receive_json(self, content, **kwargs):
        """The page never needs to send anything; ignore whatever arrives."""

    async def approval_changed(self, event):
        await self.send_json({"approval_id": str(event.get("approval_id", "")),
                              "status": str(event.get("status", ""))})
