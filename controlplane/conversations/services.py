"""Conversations' write side: storing an inbound message once (audited, never its text: the hash and
length), attaching it to the run it is given to, and recording each reply delivered. The relay
(controlplane.relay) calls these; it alone talks to chat servers. Nothing here acts on what a message
says (invariant 7)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from controlplane.audit.services import audit_append
from controlplane.conversations.models import Channel, Delivery, Message, RelayCursor
from controlplane.conversations.roles import speaker_role
from controlplane.core.errors import RosterError
from controlplane.fleet.models import Run


class ChannelUnusable(RosterError):
    """The channel is disabled, or not a conversation channel, so no message of it becomes work."""


@dataclass(frozen=True)
class Inbound:
    """One message as an adapter read it from the chat server."""

    external_id: str
    speaker_id: str
    speaker_name: str
    sent_at: datetime
    text: str


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def message_store(channel: Channel, inbound: Inbound) -> tuple[Message, bool]:
    """Store an inbound message of a conversation channel once: (message, created). A message seen before
    (same channel, same external id) is returned as it is, created False, and nothing is written."""
    if not channel.enabled or channel.purpose != Channel.Purpose.CONVERSATION:
        raise ChannelUnusable(f"channel {channel.name} does not take conversation messages")
    existing = Message.objects.filter(channel=channel, external_id=inbound.external_id).first()
    if existing is not None:
        return existing, False
    limit = settings.ROSTER_CONVERSATION_MESSAGE_MAX_CHARS
    text = inbound.text.replace("\x00", "\ufffd")
    truncated = len(text) > limit
    role = speaker_role(channel, inbound.speaker_id)
    try:
        with transaction.atomic():
            message = Message.objects.create(
                channel=channel,
                direction=Message.Direction.INBOUND,
                external_id=inbound.external_id[:255],
                speaker_id=inbound.speaker_id[:255],
                speaker_name=inbound.speaker_name[:255],
                role=role,
                sent_at=inbound.sent_at,
                text=text[:limit],
                text_truncated=truncated,
            )
            audit_append(
                "message",
                {
                    "event": "received",
                    "channel": channel.name,
                    "message": message.pk,
                    "external_id": message.external_id,
                    "speaker": message.speaker_id,
                    "role": role,
                    "chars": len(text),
                    "text_sha256": _digest(text),
                    "truncated": truncated,
                },
                worker=channel.worker.name if channel.worker_id else "",
            )
    except IntegrityError:  # stored meanwhile by another delivery of the same message
        return Message.objects.get(channel=channel, external_id=inbound.external_id), False
    return message, True


def message_give_to_run(message: Message, run: Run, *, joined: bool) -> None:
    """The run this message is given to (it started it, or joined it while it was still queued)."""
    Message.objects.filter(pk=message.pk, run__isnull=True).update(run=run)
    message.run = run
    audit_append(
        "message",
        {
            "event": "joined_run" if joined else "started_run",
            "channel": message.channel.name,
            "message": message.pk,
            "run": run.pk,
        },
        run=run,
        worker=run.worker,
    )


def queued_run_of(channel: Channel) -> Run | None:
    """The channel's run that has not been claimed yet (its input is not assembled): a new message joins
    it instead of starting another. Locked, so its claim waits for us (and we see a claim that won)."""
    run_ids = (
        Message.objects.filter(
            channel=channel,
            direction=Message.Direction.INBOUND,
            run__status=Run.Status.QUEUED,
            run__input_assembled=False,
        )
        .values_list("run_id", flat=True)
        .order_by("-run_id")[:1]
    )
    run = Run.objects.select_for_update().filter(pk__in=list(run_ids)).first()
    if run is None or run.status != Run.Status.QUEUED or run.input_assembled:
        return None
    return run


def split_text(text: str, limit: int) -> list[str]:
    """Parts of at most `limit` characters, cut at a paragraph, a line or a space where there is one, with
    "(i/n)" marks when there is more than one part."""
    text = text.strip() or "(no answer)"
    mark_room = 12
    if len(text) <= limit:
        return [text]
    room = max(1, limit - mark_room)
    parts, rest = [], text
    while rest:
        if len(rest) <= room:
            parts.append(rest)
            break
        cut = max(rest.rfind("\n\n", 0, room), rest.rfind("\n", 0, room), rest.rfind(" ", 0, room))
        cut = cut if cut > room // 2 else room
        parts.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    return [f"({i}/{len(parts)}) {part}" for i, part in enumerate(parts, 1)]


def channel_limit(channel: Channel) -> int:
    if channel.max_message_chars:
        return channel.max_message_chars
    return {
        Channel.Kind.MATRIX: settings.ROSTER_CHANNEL_MATRIX_MAX_CHARS,
        Channel.Kind.SLACK: settings.ROSTER_CHANNEL_SLACK_MAX_CHARS,
        Channel.Kind.MATTERMOST: settings.ROSTER_CHANNEL_MATTERMOST_MAX_CHARS,
    }[channel.kind]


def reply_text(run: Run) -> str:
    """What goes back to the room: the run's answer, or a fixed notice of how it ended (the trusted side's
    words; never the box's output)."""
    if run.answer.strip():
        return run.answer
    return f"(run {run.pk} ended {run.status} without an answer)"


def delivery_open(run: Run, channel: Channel) -> Delivery:
    """The run's delivery, made once with its parts fixed (a restart sends the same parts)."""
    delivery, created = Delivery.objects.get_or_create(
        run=run, defaults={"channel": channel, "parts": split_text(reply_text(run), channel_limit(channel))}
    )
    if created:
        audit_append(
            "delivery",
            {
                "event": "opened",
                "run": run.pk,
                "channel": channel.name,
                "parts": len(delivery.parts),
                "answer_chars": len(run.answer),
            },
            run=run,
            worker=run.worker,
        )
    return delivery


def delivery_part_sent(delivery: Delivery, index: int, external_id: str, *, bot_id: str) -> None:
    """Part `index` is on the chat server: record it, and the reply as a message of the conversation
    (role worker), in one transaction."""
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update().select_related("run__worker", "channel").get(pk=delivery.pk)
        )
        if index < len(delivery.sent_ids):
            return
        delivery.sent_ids = [*delivery.sent_ids, external_id]
        done = len(delivery.sent_ids) == len(delivery.parts)
        if done:
            delivery.status, delivery.delivered_at = Delivery.Status.SENT, timezone.now()
        delivery.save(update_fields=["sent_ids", "status", "delivered_at"])
        Message.objects.get_or_create(
            channel=delivery.channel,
            external_id=external_id or f"roster-delivery-{delivery.pk}-{index}",
            defaults={
                "direction": Message.Direction.OUTBOUND,
                "speaker_id": bot_id,
                "speaker_name": "worker",
                "role": "worker",
                "sent_at": timezone.now(),
                "text": delivery.parts[index],
                "run": delivery.run,
            },
        )
        if done:
            audit_append(
                "delivery",
                {
                    "event": "delivered",
                    "run": delivery.run_id,
                    "channel": delivery.channel.name,
                    "parts": len(delivery.parts),
                    "ids": delivery.sent_ids,
                },
                run=delivery.run,
                worker=delivery.run.worker,
            )


def delivery_attempt_failed(delivery: Delivery, error: str) -> None:
    """A failed send: retried with backoff until ROSTER_RELAY_DELIVERY_MAX_ATTEMPTS, then failed (audited)."""
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update().select_related("run__worker", "channel").get(pk=delivery.pk)
        )
        delivery.attempts += 1
        delivery.last_error = error[:300]
        final = delivery.attempts >= settings.ROSTER_RELAY_DELIVERY_MAX_ATTEMPTS
        backoff = min(300.0, settings.ROSTER_RELAY_BACKOFF_SECONDS * 2**delivery.attempts)
        delivery.next_attempt_at = timezone.now() + timedelta(seconds=backoff)
        if final:
            delivery.status = Delivery.Status.FAILED
        delivery.save(update_fields=["attempts", "last_error", "next_attempt_at", "status"])
        if final:
            audit_append(
                "delivery",
                {
                    "event": "failed",
                    "run": delivery.run_id,
                    "channel": delivery.channel.name,
                    "attempts": delivery.attempts,
                    "error": delivery.last_error,
                },
                run=delivery.run,
                worker=delivery.run.worker,
                verdict="failed",
            )


def cursor_get(key: str) -> str | None:
    return RelayCursor.objects.filter(key=key).values_list("position", flat=True).first()


def cursor_set(key: str, position: str) -> None:
    """Call in the transaction that stored what came before the position."""
    RelayCursor.objects.update_or_create(key=key, defaults={"position": position})
