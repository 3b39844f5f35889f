"""Where the outbox sends: a Matrix room through its homeserver's connection, a webhook channel's reply
URL (the incoming-webhook URL in the vault) by a plain POST of {"text": …}. Webhook channels cannot edit
a post, so approvers' rooms are Matrix rooms (checked when a channel is saved)."""

from __future__ import annotations

import httpx
from django.conf import settings

from controlplane.conversations.models import Channel
from controlplane.relay.outbox import SendFailed, db
from controlplane.vault.services import secret_reveal


def _reply_url(channel_id: int) -> str:
    channel = Channel.objects.select_related("reply_url").get(pk=channel_id)
    if channel.reply_url is None:
        raise SendFailed(f"channel {channel.name} has no reply URL")
    return secret_reveal(channel.reply_url)


class Senders:
    def __init__(self, relay):
        self.relay = relay

    def _matrix(self, channel: Channel):
        connection = self.relay.matrix.get(channel.server_id)
        if connection is None:
            raise SendFailed(f"no connection to the homeserver of channel {channel.name}")
        return connection

    def bot_id(self, channel: Channel) -> str:
        if channel.kind == Channel.Kind.MATRIX:
            return self._matrix(channel).bot_id(channel)
        return f"roster:{channel.worker.name}" if channel.worker_id else "roster"

    async def send(self, channel: Channel, text: str, txn_id: str) -> str:
        if channel.kind == Channel.Kind.MATRIX:
            return await self._matrix(channel).send(channel, text, txn_id)
        url = await db(_reply_url)(channel.pk)
        try:
            async with httpx.AsyncClient(
                timeout=settings.ROSTER_RELAY_HTTP_TIMEOUT_SECONDS, follow_redirects=False, trust_env=False
            ) as client:
                response = await client.post(url, json={"text": text})
        except httpx.HTTPError as exc:
            raise SendFailed(type(exc).__name__) from None
        if not 200 <= response.status_code < 300:
            raise SendFailed(f"HTTP {response.status_code}")
        return f"webhook:{txn_id}"

    async def edit(self, channel: Channel, external_id: str, text: str, txn_id: str) -> str:
        if channel.kind != Channel.Kind.MATRIX:
            raise SendFailed("webhook channels cannot edit a post")
        return await self._matrix(channel).edit(channel, external_id, text, txn_id)
