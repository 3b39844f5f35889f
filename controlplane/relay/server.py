"""The relay's HTTP listener: signed webhooks in (POST /hooks/<channel>) and its health (GET /healthz,
what scripts/stack_check.py reads). Loopback unless ROSTER_RELAY_HOST says otherwise; a reverse proxy puts
the hooks where Slack or Mattermost can reach them."""

from __future__ import annotations

import logging

from aiohttp import web
from django.conf import settings
from django.db import connection

from controlplane.conversations.models import Channel
from controlplane.conversations.services import ChannelUnusable
from controlplane.relay.intake import message_into_work
from controlplane.relay.outbox import db
from controlplane.relay.webhooks import Refused, verify
from controlplane.vault.services import secret_reveal

log = logging.getLogger(__name__)


def _webhook_channel(name: str) -> tuple[Channel, str] | None:
    channel = (
        Channel.objects.select_related("worker", "signing_secret")
        .filter(
            name=name,
            enabled=True,
            purpose=Channel.Purpose.CONVERSATION,
            kind__in=[Channel.Kind.SLACK, Channel.Kind.MATTERMOST],
        )
        .first()
    )
    if channel is None or channel.signing_secret is None:
        return None
    return channel, secret_reveal(channel.signing_secret)


def _database_answers() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone() == (1,)


def make_app(relay) -> web.Application:
    limit = settings.ROSTER_WEBHOOK_MAX_BYTES

    async def hook(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if request.content_length is not None and request.content_length > limit:
            return _refused(name, Refused(413, "too large"))
        try:
            body = await request.content.read(limit + 1)
        except Exception:  # noqa: BLE001 - a broken upload is a refusal like any other
            return _refused(name, Refused(400, "unreadable body"))
        found = await db(_webhook_channel)(name)
        if found is None:
            return _refused(name, Refused(404, "no such webhook channel"))
        channel, secret = found
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            verified = verify(channel, secret, headers, body)
        except Refused as exc:
            return _refused(name, exc)
        if verified.inbound is not None:
            try:
                await db(message_into_work)(channel, verified.inbound)
            except ChannelUnusable:
                return _refused(name, Refused(404, "no such webhook channel"))
        relay.counts["webhook_messages"] += int(verified.inbound is not None)
        return web.json_response(verified.answer or {"ok": True})

    async def health(request: web.Request) -> web.Response:
        try:
            database = await db(_database_answers)()
        except Exception as exc:  # noqa: BLE001 - said, not raised
            return web.json_response({"ok": False, "database": f"{type(exc).__name__}"}, status=503)
        return web.json_response({"ok": database, "matrix": relay.matrix_states(), "counts": relay.counts})

    app = web.Application(client_max_size=limit + 1024)
    app.router.add_post("/hooks/{name}", hook)
    app.router.add_get("/healthz", health)
    return app


def _refused(name: str, exc: Refused) -> web.Response:
    # Logged, never stored: an unauthenticated sender must not be able to fill the record.
    log.warning("webhook %s refused: %s %s", name[:64], exc.status, exc.reason)
    return web.json_response({"ok": False, "error": exc.reason}, status=exc.status)
