"""What the relay sends: runs' answers back to the conversations they serve (split per the channel's
limit, each part recorded as it is sent), held requests and proposals posted to approvers' rooms, and the
posts edited when their subject moves on (a decision on the web, expiry). Network sends are async; every
read and write of the database runs in a thread (asgiref's sync_to_async)."""

from __future__ import annotations

import logging
from typing import Protocol

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from controlplane.conversations import chat_approvals
from controlplane.conversations.models import Channel
from controlplane.conversations.selectors import runs_awaiting_delivery
from controlplane.conversations.services import delivery_attempt_failed, delivery_open, delivery_part_sent
from controlplane.core.errors import RosterError

log = logging.getLogger(__name__)


class SendFailed(RosterError):
    """The chat server did not take the message (unreachable, refused); worth a later attempt."""


class Sender(Protocol):
    def bot_id(self, channel: Channel) -> str: ...

    async def send(self, channel: Channel, text: str, txn_id: str) -> str:
        """Post `text`; the chat server's id for it. The same txn_id twice posts once (where the server
        deduplicates by transaction id)."""

    async def edit(self, channel: Channel, external_id: str, text: str, txn_id: str) -> str: ...


def _fresh_connection(function):
    """The relay lives for days: before each database step, drop a connection that broke (a database
    restart) or outlived CONN_MAX_AGE, as Django does around each request."""

    def call(*args, **kwargs):
        close_old_connections()
        return function(*args, **kwargs)

    return call


def db(function):
    return sync_to_async(_fresh_connection(function), thread_sensitive=True)


async def deliver_answers(sender: Sender) -> int:
    sent = 0
    for run, channel in await db(runs_awaiting_delivery)():
        delivery = await db(delivery_open)(run, channel)
        for index in range(len(delivery.sent_ids), len(delivery.parts)):
            try:
                external_id = await sender.send(
                    channel, delivery.parts[index], f"roster-d{delivery.pk}-p{index}"
                )
            except SendFailed as exc:
                log.warning("delivery of run %s to %s failed: %s", run.pk, channel.name, exc)
                await db(delivery_attempt_failed)(delivery, str(exc))
                break
            await db(delivery_part_sent)(delivery, index, external_id, bot_id=sender.bot_id(channel))
            sent += 1
    return sent


async def post_approvals(sender: Sender) -> int:
    posted = 0
    for channel, post in await db(chat_approvals.subjects_to_post)():
        text = await db(chat_approvals.post_text)(post)
        try:
            external_id = await sender.send(channel, text, f"roster-post{post.pk}")
        except SendFailed as exc:
            log.warning("approval post %s to %s failed: %s", post.pk, channel.name, exc)
            continue
        await db(chat_approvals.post_sent)(post, external_id)
        posted += 1
    return posted


async def edit_posts(sender: Sender) -> int:
    edited = 0
    for post in await db(chat_approvals.posts_to_edit)():
        text = await db(chat_approvals.post_text)(post)
        status = await db(chat_approvals.effective_status)(post.approval or post.proposal)
        try:
            await sender.edit(post.channel, post.external_id, text, f"roster-post{post.pk}-{status}")
        except SendFailed as exc:
            log.warning("editing approval post %s failed: %s", post.pk, exc)
            continue
        await db(chat_approvals.post_edited)(post)
        edited += 1
    return edited
