"""A speaker's role in a channel, a label the worker weighs (P5) and never a power: `approver` when the
chat id is linked to an active Roster user who may decide approvals, `owner` when the admin named the chat
id among the channel's owners, else `member`. The relay's own bot is `worker`."""

from __future__ import annotations

from controlplane.conversations.models import Channel, ChatIdentity

DECIDE_PERMISSION = "approvals.decide_approval"
MEMBER, OWNER, APPROVER, WORKER = "member", "owner", "approver", "worker"


def linked_user(kind: str, chat_id: str):
    """The active Roster user this chat id is linked to, or None."""
    identity = ChatIdentity.objects.select_related("user").filter(kind=kind, chat_id=chat_id).first()
    if identity is None or not identity.user.is_active:
        return None
    return identity.user


def allowlisted_approver(kind: str, chat_id: str):
    """The Roster user behind this chat id if they may decide approvals now (checked at each decision,
    so removing someone from the Approvers group takes effect at once), else None."""
    user = linked_user(kind, chat_id)
    if user is None or not user.has_perm(DECIDE_PERMISSION):
        return None
    return user


def speaker_role(channel: Channel, chat_id: str) -> str:
    if channel.kind == Channel.Kind.MATRIX and channel.server_id and chat_id == channel.server.bot_user_id:
        return WORKER
    if allowlisted_approver(channel.kind, chat_id) is not None:
        return APPROVER
    if chat_id in (channel.owners or []):
        return OWNER
    return MEMBER
