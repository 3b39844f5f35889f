"""A conversation view per channel: its messages (in and out), the runs they became, the replies delivered
and who was in the room. Messages are shown as quoted text, never as markup (they are anyone's words)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from controlplane.conversations.models import Channel, Delivery
from controlplane.conversations.selectors import channel_messages, channel_runs
from controlplane.web.security import hardened


@require_GET
@hardened
@login_required
@permission_required("conversations.view_channel", raise_exception=True)
def channel_detail(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = get_object_or_404(Channel.objects.select_related("worker", "server"), pk=channel_id)
    messages = channel_messages(channel)
    runs = channel_runs(channel)
    deliveries = {d.run_id: d for d in Delivery.objects.filter(run__in=runs)}
    speakers: dict[str, dict] = {}
    for message in messages:
        if message.direction == "in":
            speakers.setdefault(message.speaker_id, {"id": message.speaker_id, "name": message.speaker_name,
                                                     "role": message.role, "messages": 0})
            speakers[message.speaker_id]["messages"] += 1
    return render(request, "web/channel.html", {
        "channel": channel, "chat_messages": messages, "speakers": list(speakers.values()),
        "members": channel.members or [],
        "runs": [{"run": run, "delivery": deliveries.get(run.pk)} for run in runs],
    })
