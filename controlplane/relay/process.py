"""The relay process (`python -m controlplane.relay`; started by `make up`, in compose too): keeps one
connection per enabled Matrix homeserver (reconnecting with backoff), serves signed webhooks and its
health, and every ROSTER_RELAY_POLL_SECONDS delivers ended runs' answers, posts held requests and
proposals to approvers' rooms and edits posts whose subject moved on. It calls conversations and
dispatch; the box never reaches a chat server (it has no grant to one)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections import Counter

from aiohttp import web
from django.conf import settings

from controlplane.conversations.models import ChatServer
from controlplane.relay import outbox
from controlplane.relay.matrix import MatrixConnection
from controlplane.relay.outbox import db
from controlplane.relay.senders import Senders
from controlplane.relay.server import make_app

log = logging.getLogger("controlplane.relay")


def _enabled_servers() -> list[int]:
    return list(ChatServer.objects.filter(enabled=True).values_list("pk", flat=True))


class Relay:
    def __init__(self):
        self.matrix: dict[int, MatrixConnection] = {}
        self.tasks: dict[int, asyncio.Task] = {}
        self.counts: Counter = Counter()
        self.senders = Senders(self)

    def matrix_states(self) -> dict:
        return {str(k): dict(v.state) for k, v in self.matrix.items()}

    async def reconcile(self) -> None:
        """Start a connection per enabled server, stop those no longer enabled."""
        wanted = set(await db(_enabled_servers)())
        for server_id in wanted - set(self.matrix):
            connection = MatrixConnection(server_id)
            self.matrix[server_id] = connection
            self.tasks[server_id] = asyncio.create_task(connection.run(), name=f"matrix-{server_id}")
        for server_id in set(self.matrix) - wanted:
            await self._stop(server_id)

    async def _stop(self, server_id: int) -> None:
        connection, task = self.matrix.pop(server_id), self.tasks.pop(server_id)
        connection.stopping = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await connection.close()

    async def tick(self) -> None:
        self.counts["delivered_parts"] += await outbox.deliver_answers(self.senders)
        self.counts["approval_posts"] += await outbox.post_approvals(self.senders)
        self.counts["post_edits"] += await outbox.edit_posts(self.senders)

    async def serve(self, host: str, port: int) -> None:
        runner = web.AppRunner(make_app(self), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        log.info("relay listening on %s:%s", host, port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        ticks = 0
        try:
            while not stop.is_set():
                if ticks % 10 == 0:
                    await self._guarded(self.reconcile)
                await self._guarded(self.tick)
                ticks += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), settings.ROSTER_RELAY_POLL_SECONDS)
        finally:
            for server_id in list(self.matrix):
                await self._stop(server_id)
            await runner.cleanup()

    @staticmethod
    async def _guarded(step) -> None:
        try:
            await step()
        except Exception:  # noqa: BLE001 - the database or a chat server failing: try again next tick
            log.exception("relay step %s failed", step.__name__)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m controlplane.relay")
    parser.add_argument("--host", default=settings.ROSTER_RELAY_HOST)
    parser.add_argument("--port", type=int, default=settings.ROSTER_RELAY_PORT)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(Relay().serve(args.host, args.port))
