"""The approval queue's websocket. It carries only "something changed" (approval id and status); the page
then fetches the server-rendered list over HTTP, so nothing from a box ever travels through here as
markup, and the same permission checks as the page apply."""

from __future__ import annotations

from importlib import import_module

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model

from controlplane.approvals.broadcast import APPROVALS_GROUP

VIEW_PERM = "approvals.view_approval"


@database_sync_to_async
def _may_watch(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active and user.has_perm(VIEW_PERM))


@database_sync_to_async
def _may_still_watch(scope) -> bool:
    """Checked again on every push: a socket outlives sign-out, deactivation and role changes otherwise."""
    user = scope.get("user")
    if not (user and user.is_authenticated):
        return False
    session = scope.get("session")
    if session is not None:
        key = session.session_key
        stored = import_module(settings.SESSION_ENGINE).SessionStore(key) if key else {}
        if str(stored.get(SESSION_KEY)) != str(user.pk):  # signed out, expired, or someone else now
            return False
    fresh = get_user_model()._default_manager.filter(pk=user.pk).first()
    return bool(fresh and fresh.is_active and fresh.has_perm(VIEW_PERM))


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
        if not await _may_still_watch(self.scope):
            await self.channel_layer.group_discard(APPROVALS_GROUP, self.channel_name)
            await self.close(code=4403)
            return
        await self.send_json({"approval_id": str(event.get("approval_id", "")),
                              "status": str(event.get("status", ""))})
