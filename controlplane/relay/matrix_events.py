"""A Matrix sync batch, read into what Roster stores: messages of conversation rooms, and replies and
reactions on approval posts in approvers' rooms. Runs in one database transaction with the sync token that
follows the batch (controlplane.conversations.services.cursor_set), so a restart resumes after the last
stored batch and a batch read twice is stored once (a message's event id is unique in its channel).
Only the raw event dicts are read here (the client library parses nothing Roster relies on)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db import transaction

from controlplane.conversations import chat_approvals
from controlplane.conversations.models import Channel, ChatServer
from controlplane.conversations.services import ChannelUnusable, Inbound, cursor_set
from controlplane.relay.intake import message_into_work

log = logging.getLogger(__name__)
TEXT_TYPES = ("m.text", "m.notice", "m.emote")


def cursor_key(server: ChatServer) -> str:
    return f"matrix:{server.pk}:{server.bot_user_id}"


@dataclass
class Batch:
    """Events per room (oldest first) and where the next sync starts."""

    next_batch: str
    events: dict[str, list[dict]] = field(default_factory=dict)
    newest_ts: int = 0


def _when(event: dict) -> datetime:
    ts = event.get("origin_server_ts")
    ts = ts if isinstance(ts, int) and ts > 0 else int(datetime.now(UTC).timestamp() * 1000)
    return datetime.fromtimestamp(ts / 1000, tz=UTC)


def _relation(content: dict) -> dict:
    relates = content.get("m.relates_to")
    return relates if isinstance(relates, dict) else {}


def message_of(event: dict, names: dict[str, str]) -> Inbound | None:
    """A conversation message, or None (not a text message, an edit, a redaction, no id)."""
    content = event.get("content")
    if event.get("type") != "m.room.message" or not isinstance(content, dict):
        return None
    if content.get("msgtype") not in TEXT_TYPES or not isinstance(content.get("body"), str):
        return None
    if _relation(content).get("rel_type") == "m.replace":
        return None  # an edit of an earlier message: the original was relayed as it was
    event_id, sender = event.get("event_id"), event.get("sender")
    if not isinstance(event_id, str) or not isinstance(sender, str):
        return None
    return Inbound(
        external_id=event_id,
        speaker_id=sender,
        speaker_name=names.get(sender, sender),
        sent_at=_when(event),
        text=content["body"],
    )


def answer_of(channel: Channel, event: dict) -> chat_approvals.ChatAnswer | None:
    """A reaction or a reply on some event of an approvers' room, or None."""
    content = event.get("content")
    if not isinstance(content, dict) or not isinstance(event.get("sender"), str):
        return None
    relation = _relation(content)
    event_id = str(event.get("event_id", ""))
    if event.get("type") == "m.reaction" and relation.get("rel_type") == "m.annotation":
        target, key = relation.get("event_id"), relation.get("key")
        if isinstance(target, str) and isinstance(key, str):
            return chat_approvals.ChatAnswer(
                channel, target, event["sender"], event_id, chat_approvals.answer_from_reaction(key)
            )
    if event.get("type") == "m.room.message" and isinstance(content.get("body"), str):
        reply_to = relation.get("m.in_reply_to")
        target = reply_to.get("event_id") if isinstance(reply_to, dict) else None
        if isinstance(target, str):
            approve, reason = chat_approvals.answer_from_reply(content["body"])
            return chat_approvals.ChatAnswer(channel, target, event["sender"], event_id, approve, reason)
    return None


def _names(events: list[dict]) -> dict[str, str]:
    names = {}
    for event in events:
        content = event.get("content")
        if event.get("type") == "m.room.member" and isinstance(content, dict):
            name = content.get("displayname")
            if isinstance(name, str) and isinstance(event.get("state_key"), str):
                names[event["state_key"]] = name[:255]
    return names


def store_batch(server: ChatServer, batch: Batch, known_names: dict[str, dict[str, str]]) -> dict:
    """Everything of one batch, then its cursor, in one transaction. Counts of what was done."""
    counts = {"messages": 0, "answers": 0, "ignored": 0}
    channels = {
        c.room_id: c
        for c in Channel.objects.filter(server=server, enabled=True).select_related("worker", "server")
    }
    with transaction.atomic():
        for room_id, events in batch.events.items():
            channel = channels.get(room_id)
            if channel is None:
                continue
            names = {**known_names.get(room_id, {}), **_names(events)}
            for event in events:
                if event.get("sender") == server.bot_user_id:
                    continue  # the relay's own replies and posts (recorded when sent)
                try:
                    with transaction.atomic():
                        _store_event(channel, event, names, counts)
                except ChannelUnusable:
                    continue
                except Exception:  # noqa: BLE001 - one bad event must not hold back the room's others
                    log.exception("event %s in %s could not be stored", event.get("event_id"), channel.name)
        cursor_set(cursor_key(server), json.dumps({"since": batch.next_batch, "ts": batch.newest_ts}))
    return counts


def _store_event(channel: Channel, event: dict, names: dict[str, str], counts: dict) -> None:
    if channel.purpose == Channel.Purpose.APPROVALS:
        answer = answer_of(channel, event)
        if answer is not None:
            result = chat_approvals.chat_answer_apply(answer)
            counts["answers" if result == "decided" else "ignored"] += 1
        return  # nothing in an approvers' room is ever a conversation message
    inbound = message_of(event, names)
    if inbound is not None:
        _, _, created = message_into_work(channel, inbound)
        counts["messages"] += int(created)
