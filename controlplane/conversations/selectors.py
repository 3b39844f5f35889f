"""Conversations' reads: the conversation a run serves (its input's turns and who was in the room), the
runs whose answers still have to go back, a channel's page, a worker's channels."""

from __future__ import annotations

from datetime import UTC

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from controlplane.conversations.models import Channel, Delivery, Message
from controlplane.fleet.models import Run, Worker


def _iso(moment) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def channel_of_run(run: Run) -> Channel | None:
    """The conversation channel this run serves (the channel of the messages given to it), or None."""
    message = (
        Message.objects.select_related("channel__worker", "channel__server")
        .filter(run=run, direction=Message.Direction.INBOUND)
        .order_by("id")
        .first()
    )
    return message.channel if message is not None else None


def input_origin(run: Run) -> Run:
    """The run whose messages this run's input is drawn from: itself, or for a requeue (a repair: the same
    task with the same input origin) the run it does again, followed back to the first."""
    seen = {run.pk}
    while run.requeue_of_id is not None and run.requeue_of_id not in seen:
        seen.add(run.requeue_of_id)
        run = Run.objects.get(pk=run.requeue_of_id)
    return run


def conversation_for_run(run: Run) -> dict | None:
    """What the run's input carries of its conversation: {"channel", "turns", "participants"}, or None for
    a run no message was given to. The turns are the channel's recent history up to the newest message
    given to this run (earlier messages and the worker's own replies as context), oldest first; the
    participants are every speaker of them but the worker, and the room's members the adapter saw."""
    given = Message.objects.filter(run=input_origin(run), direction=Message.Direction.INBOUND)
    last = given.order_by("-id").first()
    if last is None:
        return None
    channel = last.channel
    history = list(
        Message.objects.filter(channel=channel, id__lte=last.id).order_by("-id")[
            : settings.ROSTER_RUN_INPUT_MAX_TURNS
        ]
    )[::-1]
    turns = [
        {
            "speaker": m.speaker_id,
            "name": m.speaker_name or m.speaker_id,
            "role": m.role,
            "time": _iso(m.sent_at),
            "text": m.text,
        }
        for m in history
    ]
    people: dict[str, dict] = {}
    for m in history:
        if m.direction == Message.Direction.INBOUND:
            people.setdefault(m.speaker_id, {"id": m.speaker_id, "name": m.speaker_name, "role": m.role})
    for member in channel.members or []:
        if isinstance(member, dict) and member.get("id") and member.get("id") not in people:
            people[member["id"]] = {
                "id": str(member["id"]),
                "name": str(member.get("name", "")),
                "role": "member",
            }
    bot = channel.server.bot_user_id if channel.server_id else ""
    participants = [p for p in people.values() if p["id"] != bot]
    return {"channel": channel.name, "turns": turns, "participants": participants}


def runs_awaiting_delivery(limit: int = 50) -> list[tuple[Run, Channel]]:
    """Ended runs that served a conversation and whose answer has not gone back yet (no delivery, or one
    still pending and due)."""
    now = timezone.now()
    ended = [s for s in Run.Status.values if s not in Run.LIVE_STATUSES]
    candidates = (
        Message.objects.filter(
            direction=Message.Direction.INBOUND, run__status__in=ended, channel__enabled=True
        )
        .exclude(run__delivery__status__in=[Delivery.Status.SENT, Delivery.Status.FAILED])
        .values_list("run_id", flat=True)
        .distinct()
        .order_by("run_id")[:limit]
    )
    out = []
    for run in Run.objects.select_related("worker").filter(pk__in=list(candidates)).order_by("pk"):
        delivery = Delivery.objects.filter(run=run).first()
        if delivery is not None and delivery.next_attempt_at and delivery.next_attempt_at > now:
            continue
        channel = channel_of_run(run)
        if channel is not None:
            out.append((run, channel))
    return out


def channels_of_worker(worker: Worker) -> QuerySet[Channel]:
    return Channel.objects.filter(worker=worker).select_related("server").order_by("name")


def channel_messages(channel: Channel, limit: int = 200) -> list[Message]:
    return list(Message.objects.filter(channel=channel).select_related("run").order_by("-id")[:limit])[::-1]


def channel_runs(channel: Channel, limit: int = 50) -> list[Run]:
    ids = (
        Message.objects.filter(channel=channel, run__isnull=False).values_list("run_id", flat=True).distinct()
    )
    return list(Run.objects.filter(pk__in=ids).select_related("worker").order_by("-id")[:limit])


def run_messages(run: Run) -> list[Message]:
    return list(Message.objects.filter(run=run).select_related("channel").order_by("id"))


def run_delivery(run: Run) -> Delivery | None:
    return Delivery.objects.filter(run=run).select_related("channel").first()
