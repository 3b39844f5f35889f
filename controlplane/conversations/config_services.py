"""Channel configuration, saved and deleted on the record: each change is validated (a channel serves
exactly one worker, an approvers' room is a Matrix room, a webhook channel has its signing secret and reply
URL) and audited as `channel_change` in the same transaction (who, what, the worker it concerns; secrets by
name only)."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import transaction

from controlplane.audit.services import audit_append
from controlplane.conversations.models import Channel, ChatIdentity, ChatServer

# A room id: `!opaque:server` up to room version 11; from version 12 (the default of the Synapse that the
# tests and the demo run) the unpadded URL-safe base64 of the create event's hash, with no server part.
ROOM_ID = re.compile(r"![^:\s]+:[^\s]+|![A-Za-z0-9_-]{43}")


def channel_problems(channel: Channel) -> dict[str, str]:
    problems = {}
    conversation = channel.purpose == Channel.Purpose.CONVERSATION
    if conversation and channel.worker_id is None:
        problems["worker"] = "a conversation channel serves exactly one worker"
    if channel.kind == Channel.Kind.MATRIX:
        if channel.server_id is None:
            problems["server"] = "a Matrix room needs its homeserver"
        if not isinstance(channel.room_id, str) or not ROOM_ID.fullmatch(channel.room_id):
            problems["room_id"] = (
                "a Matrix room id, e.g. !abc123:example.org (or a version 12 room's !<43 characters>)"
            )
    else:
        if not conversation:
            problems["kind"] = (
                "an approvers' room is a Matrix room (approval posts are edited and reacted to)"
            )
        if channel.signing_secret_id is None:
            problems["signing_secret"] = (
                "a webhook channel needs its signing secret (Slack) or token (Mattermost)"
            )
        if channel.reply_url_id is None:
            problems["reply_url"] = "a webhook channel needs the incoming-webhook URL its replies go to"
        if channel.server_id or channel.room_id:
            problems["server"] = "only Matrix channels have a homeserver and a room"
    if not isinstance(channel.owners, list) or not all(isinstance(o, str) for o in channel.owners):
        problems["owners"] = "a list of chat ids"
    return problems


def _facts(obj) -> dict:
    if isinstance(obj, Channel):
        return {
            "object": "channel",
            "name": obj.name,
            "kind": obj.kind,
            "purpose": obj.purpose,
            "worker": obj.worker.name if obj.worker_id else None,
            "enabled": obj.enabled,
            "server": obj.server.name if obj.server_id else None,
            "room_id": obj.room_id,
            "signing_secret": obj.signing_secret.name if obj.signing_secret_id else None,
            "reply_url_secret": obj.reply_url.name if obj.reply_url_id else None,
            "owners": obj.owners,
            "max_message_chars": obj.max_message_chars,
        }
    if isinstance(obj, ChatServer):
        return {
            "object": "chat_server",
            "name": obj.name,
            "homeserver_url": obj.homeserver_url,
            "bot_user_id": obj.bot_user_id,
            "access_token_secret": obj.access_token.name,
            "enabled": obj.enabled,
        }
    return {
        "object": "chat_identity",
        "kind": obj.kind,
        "chat_id": obj.chat_id,
        "user": obj.user.get_username(),
    }


def config_save(obj, *, actor: str) -> None:
    """Save a channel, chat server or chat identity, validated, with its audit record."""
    if isinstance(obj, Channel):
        problems = channel_problems(obj)
        if problems:
            raise ValidationError(problems)
    with transaction.atomic():
        before = _facts(type(obj).objects.get(pk=obj.pk)) if obj.pk else None
        obj.save()
        worker = obj.worker.name if isinstance(obj, Channel) and obj.worker_id else ""
        audit_append(
            "channel_change",
            {"event": "saved", "by": actor, "before": before, "after": _facts(obj)},
            worker=worker,
        )


def config_delete(obj, *, actor: str) -> None:
    with transaction.atomic():
        facts = _facts(obj)
        worker = obj.worker.name if isinstance(obj, Channel) and obj.worker_id else ""
        obj.delete()
        audit_append("channel_change", {"event": "deleted", "by": actor, "before": facts}, worker=worker)


__all__ = ["ChatIdentity", "channel_problems", "config_delete", "config_save"]
