"""One Matrix homeserver's connection (matrix-nio's AsyncClient): sync with the stored token, read back a
gap the relay missed while down, join the rooms configured as channels, keep the rooms' member lists, and
send and edit messages. Reconnects with doubling backoff; the access token comes from the vault and is
never logged."""

from __future__ import annotations

import asyncio
import json
import logging
import time

from django.conf import settings
from nio import (
    AsyncClient,
    AsyncClientConfig,
    JoinedMembersResponse,
    MessageDirection,
    RoomMessagesResponse,
    RoomSendResponse,
    SyncResponse,
    WhoamiResponse,
)

from controlplane.conversations.models import Channel, ChatServer
from controlplane.conversations.services import cursor_get
from controlplane.relay.matrix_events import Batch, cursor_key, store_batch
from controlplane.relay.outbox import SendFailed, db
from controlplane.vault.services import secret_reveal

log = logging.getLogger(__name__)


def _server_and_token(server_id: int) -> tuple[ChatServer, str, list[Channel]]:
    server = ChatServer.objects.select_related("access_token").get(pk=server_id)
    channels = list(Channel.objects.filter(server=server, enabled=True))
    return server, secret_reveal(server.access_token), channels


def _cursor(server: ChatServer) -> dict | None:
    raw = cursor_get(cursor_key(server))
    return json.loads(raw) if raw else None


def _set_members(channel_id: int, members: list[dict]) -> None:
    Channel.objects.filter(pk=channel_id).update(members=members)


class MatrixConnection:
    def __init__(self, server_id: int):
        self.server_id = server_id
        self.client: AsyncClient | None = None
        self.server: ChatServer | None = None
        self.rooms: dict[str, Channel] = {}
        self.names: dict[str, dict[str, str]] = {}
        self.state = {"connected": False, "last_sync": None, "error": "", "since": ""}
        self.stopping = False

    # -- sending (the outbox calls these) --
    def bot_id(self, channel: Channel) -> str:
        return self.server.bot_user_id if self.server else ""

    async def send(self, channel: Channel, text: str, txn_id: str) -> str:
        content = {"msgtype": "m.notice", "body": text}
        return await self._send(channel.room_id, content, txn_id)

    async def edit(self, channel: Channel, external_id: str, text: str, txn_id: str) -> str:
        content = {
            "msgtype": "m.notice",
            "body": "* " + text,
            "m.new_content": {"msgtype": "m.notice", "body": text},
            "m.relates_to": {"rel_type": "m.replace", "event_id": external_id},
        }
        return await self._send(channel.room_id, content, txn_id)

    async def _send(self, room_id: str, content: dict, txn_id: str) -> str:
        if self.client is None or not self.state["connected"]:
            raise SendFailed("not connected to the homeserver")
        try:
            response = await self.client.room_send(room_id, "m.room.message", content, tx_id=txn_id)
        except (TimeoutError, OSError) as exc:
            raise SendFailed(type(exc).__name__) from exc
        if not isinstance(response, RoomSendResponse):
            raise SendFailed(
                f"{getattr(response, 'status_code', '?')} {getattr(response, 'message', '')}"[:200]
            )
        return response.event_id

    # -- receiving --
    async def run(self) -> None:
        backoff = settings.ROSTER_RELAY_BACKOFF_SECONDS
        while not self.stopping:
            try:
                await self._connect()
                backoff = settings.ROSTER_RELAY_BACKOFF_SECONDS
                await self._sync_forever()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - reconnect with backoff, saying why (never the token)
                self.state.update(connected=False, error=f"{type(exc).__name__}: {str(exc)[:200]}")
                log.warning(
                    "matrix server %s: %s; reconnecting in %.0f s",
                    self.server_id,
                    self.state["error"],
                    backoff,
                )
            await self.close()
            await asyncio.sleep(backoff)
            backoff = min(settings.ROSTER_RELAY_BACKOFF_MAX_SECONDS, backoff * 2)

    async def close(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None
            await client.close()
        self.state["connected"] = False

    async def _connect(self) -> None:
        server, token, channels = await db(_server_and_token)(self.server_id)
        self.server = server
        self.rooms = {c.room_id: c for c in channels}
        timeout = settings.ROSTER_RELAY_HTTP_TIMEOUT_SECONDS + settings.ROSTER_RELAY_SYNC_TIMEOUT_MS / 1000
        client = AsyncClient(
            server.homeserver_url,
            server.bot_user_id,
            config=AsyncClientConfig(request_timeout=timeout, max_timeouts=1),
        )
        client.access_token = token
        who = await client.whoami()
        if not isinstance(who, WhoamiResponse):
            await client.close()
            raise ConnectionError(f"the homeserver refused the bot's token ({getattr(who, 'message', who)})")
        client.restore_login(server.bot_user_id, who.device_id or "", token)
        self.client = client
        self.state.update(connected=True, error="")

    def _filter(self) -> dict:
        return {
            "room": {
                "rooms": list(self.rooms),
                "timeline": {"limit": settings.ROSTER_RELAY_SYNC_TIMELINE_LIMIT},
            },
            "presence": {"not_types": ["*"]},
            "account_data": {"not_types": ["*"]},
        }

    async def _sync_forever(self) -> None:
        cursor = await db(_cursor)(self.server)
        if cursor is None:
            # First connection: the relay relays from now on; what a room said before is not replayed.
            first = await self.client.sync(timeout=0, full_state=True, sync_filter=self._filter())
            if not isinstance(first, SyncResponse):
                raise ConnectionError(f"first sync failed: {getattr(first, 'message', first)}")
            await self._after_sync(first, store_events=False, since_ts=0)
            cursor = await db(_cursor)(self.server)
        since, since_ts = cursor["since"], int(cursor.get("ts") or 0)
        await self._refresh_members()
        while not self.stopping:
            response = await self.client.sync(
                timeout=settings.ROSTER_RELAY_SYNC_TIMEOUT_MS, since=since, sync_filter=self._filter()
            )
            if not isinstance(response, SyncResponse):
                raise ConnectionError(f"sync failed: {getattr(response, 'message', response)}")
            since_ts = await self._after_sync(response, store_events=True, since_ts=since_ts)
            since = response.next_batch

    async def _after_sync(self, response: SyncResponse, *, store_events: bool, since_ts: int) -> int:
        for room_id in response.rooms.invite:
            if room_id in self.rooms:
                await self.client.join(room_id)
        batch = Batch(next_batch=response.next_batch, newest_ts=since_ts)
        member_change = False
        for room_id, room in response.rooms.join.items():
            if room_id not in self.rooms:
                continue
            events = [e.source for e in room.timeline.events if isinstance(getattr(e, "source", None), dict)]
            if store_events and room.timeline.limited and room.timeline.prev_batch:
                events = await self._gap(room_id, room.timeline.prev_batch, since_ts) + events
            state = [e.source for e in room.state if isinstance(getattr(e, "source", None), dict)]
            member_change |= any(e.get("type") == "m.room.member" for e in [*state, *events])
            self.names.setdefault(room_id, {}).update(
                {
                    e["state_key"]: e["content"]["displayname"]
                    for e in [*state, *events]
                    if e.get("type") == "m.room.member"
                    and isinstance(e.get("content"), dict)
                    and isinstance(e["content"].get("displayname"), str)
                    and isinstance(e.get("state_key"), str)
                }
            )
            if store_events:
                batch.events[room_id] = events
            for event in events:
                ts = event.get("origin_server_ts")
                if isinstance(ts, int):
                    batch.newest_ts = max(batch.newest_ts, ts)
        await db(store_batch)(self.server, batch, self.names)
        self.state.update(last_sync=time.time(), since=response.next_batch)
        if member_change:
            await self._refresh_members()
        return batch.newest_ts

    async def _gap(self, room_id: str, prev_batch: str, since_ts: int) -> list[dict]:
        """Events the sync left out (the timeline was limited): paged back until the last stored batch's
        time, at most ROSTER_RELAY_GAP_FILL_MAX_EVENTS; oldest first."""
        found: list[dict] = []
        start = prev_batch
        while len(found) < settings.ROSTER_RELAY_GAP_FILL_MAX_EVENTS:
            page = await self.client.room_messages(
                room_id, start=start, direction=MessageDirection.back, limit=100
            )
            if not isinstance(page, RoomMessagesResponse) or not page.chunk:
                break
            older = [e.source for e in page.chunk if isinstance(getattr(e, "source", None), dict)]
            fresh = [e for e in older if int(e.get("origin_server_ts") or 0) >= since_ts]
            found.extend(fresh)
            if len(fresh) < len(older) or not page.end or page.end == start:
                break
            start = page.end
        if len(found) >= settings.ROSTER_RELAY_GAP_FILL_MAX_EVENTS:
            log.warning(
                "room %s: more than %s missed events; the oldest were not read back",
                room_id,
                settings.ROSTER_RELAY_GAP_FILL_MAX_EVENTS,
            )
        return found[::-1]

    async def _refresh_members(self) -> None:
        for room_id, channel in self.rooms.items():
            response = await self.client.joined_members(room_id)
            if isinstance(response, JoinedMembersResponse):
                members = [{"id": m.user_id, "name": m.display_name or m.user_id} for m in response.members]
                self.names.setdefault(room_id, {}).update({m["id"]: m["name"] for m in members})
                await db(_set_members)(channel.pk, members)
