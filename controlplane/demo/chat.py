"""`make demo`'s conversation: a real Synapse for the demo (tools/synapse, its own SQLite under var/), a
demo room where a team member asks and an approvers' room where the demo approver answers, both served by
the stack's relay (`make up` runs it). The demo never calls dispatch for the run: the member's message goes
through the relay, which starts the agent's run; held requests and proposals are posted to the approvers'
room by the relay and decided by a reaction there; the answer is delivered back to the room by the relay.

Each demo registers a new bot account (its own relay cursor: the relay's first connection to it records
the position and replays nothing) and points the one demo chat server and its two channels at the new
Synapse and rooms; at the end the chat server is disabled, so the relay lets go of a homeserver that is
gone."""

from __future__ import annotations

import contextlib
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from django.conf import settings
from django.core.exceptions import ValidationError

from controlplane.conversations.config_services import config_save
from controlplane.conversations.models import (
    ApprovalPost,
    Channel,
    ChatIdentity,
    ChatServer,
    Delivery,
    Message,
)
from controlplane.fleet.models import Run, Worker
from controlplane.vault.services import secret_set
from tools.synapse.homeserver import Homeserver, MatrixUser, homeserver

SERVER, ROOM, APPROVERS_ROOM = "demo-synapse", "demo-room", "demo-approvers"
BOT_SECRET = "demo-matrix-bot"
MEMBER = "ana"  # the team member who asks, in the demo room only
APPROVE = "✅"
ACTOR = "make demo"


class ChatFailed(RuntimeError):
    """A step of the conversation did not happen; the message says which and where to look."""


@dataclass
class DemoChat:
    synapse: Homeserver
    bot: MatrixUser
    member: MatrixUser
    approver: MatrixUser
    server: ChatServer
    room: Channel
    approvers: Channel


def _relay_health() -> dict:
    url = f"http://127.0.0.1:{settings.ROSTER_RELAY_PORT}/healthz"
    try:
        return httpx.get(url, timeout=5, trust_env=False).json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ChatFailed(f"the relay does not answer on {url} ({type(exc).__name__}); see var/log/relay.log "
                         "(`make up` starts it)") from None


def wait_for(predicate, what: str, timeout: float):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ChatFailed(f"{what} did not happen within {timeout:.0f} s; see var/log/relay.log")
        time.sleep(0.2)


def _save_server(synapse: Homeserver, bot: MatrixUser) -> ChatServer:
    """The demo chat server, disabled first (a demo that crashed may have left it on) until the relay has
    let go of the previous demo's homeserver: its connection read the old address and rooms."""
    server = ChatServer.objects.filter(name=SERVER).first()
    if server is not None:
        _disable(server)
        wait_for(lambda: str(server.pk) not in _relay_health().get("matrix", {}),
                 "the relay letting go of the previous demo's homeserver", 30)
    token = secret_set(BOT_SECRET, bot.access_token)
    server = server or ChatServer(name=SERVER)
    server.homeserver_url, server.bot_user_id, server.access_token = synapse.url, bot.user_id, token
    server.enabled = False  # enabled once its rooms are set: the relay reads them when it connects
    config_save(server, actor=ACTOR)
    return server


def _save_channel(name: str, worker: Worker, server: ChatServer, room_id: str, purpose: str) -> Channel:
    channel = Channel.objects.filter(name=name).first()
    if channel is not None and purpose == Channel.Purpose.CONVERSATION:
        # A run's input carries its channel's recent turns: last demo's room must not be this one's
        # history. Its messages stay on record, under a retired, disabled channel.
        channel.name, channel.enabled = f"{name}-{channel.pk}", False
        config_save(channel, actor=ACTOR)
        channel = None
    channel = channel or Channel(name=name)
    channel.kind, channel.purpose, channel.worker = Channel.Kind.MATRIX, purpose, worker
    channel.server, channel.room_id, channel.enabled = server, room_id, True
    try:
        config_save(channel, actor=ACTOR)
    except ValidationError as exc:
        raise ChatFailed(f"the channel {name} for room {room_id} was refused: {exc.messages}") from None
    return channel


def _link(approver: MatrixUser, user) -> None:
    identity = ChatIdentity.objects.filter(kind=Channel.Kind.MATRIX, chat_id=approver.user_id).first()
    if identity is None or identity.user_id != user.pk:
        identity = identity or ChatIdentity(kind=Channel.Kind.MATRIX, chat_id=approver.user_id)
        identity.user = user
        config_save(identity, actor=ACTOR)


def _joined(synapse: Homeserver, viewer: MatrixUser, room_id: str) -> set[str]:
    path = f"/_matrix/client/v3/rooms/{room_id}/joined_members"
    answer = synapse.call("GET", path, token=viewer.access_token)
    return set(answer.get("joined", {}))


@contextlib.contextmanager
def demo_chat(worker: Worker, approver_user, directory: Path) -> Iterator[DemoChat]:
    """Synapse up, the people registered, both rooms made, the relay connected and in both rooms."""
    shutil.rmtree(directory, ignore_errors=True)
    with contextlib.ExitStack() as stack:
        try:
            synapse = stack.enter_context(homeserver(directory))
        except (RuntimeError, TimeoutError, OSError, subprocess.SubprocessError) as exc:
            raise ChatFailed(f"Synapse did not start: {exc}") from None
        bot = synapse.register(f"roster-bot-{secrets.token_hex(3)}")
        member, approver = synapse.register(MEMBER), synapse.register("demo-approver")
        for user, name in ((member, "Ana"), (approver, "Demo Approver"), (bot, "Roster")):
            synapse.set_name(user, name)
        room_id = synapse.create_room(member, [bot.user_id, approver.user_id], "demo")
        approvers_id = synapse.create_room(approver, [bot.user_id], "demo approvers")
        synapse.join(approver, room_id)
        server = _save_server(synapse, bot)
        stack.callback(_disable, server)  # before Synapse stops: the relay lets go of it
        room = _save_channel(ROOM, worker, server, room_id, Channel.Purpose.CONVERSATION)
        approvers = _save_channel(APPROVERS_ROOM, worker, server, approvers_id, Channel.Purpose.APPROVALS)
        _link(approver, approver_user)
        server.enabled = True
        config_save(server, actor=ACTOR)
        wait_for(lambda: (_relay_health().get("matrix", {}).get(str(server.pk)) or {}).get("since"),
                 "the relay's first sync with the demo's Synapse", 60)
        wait_for(lambda: bot.user_id in _joined(synapse, member, room_id)
                 and bot.user_id in _joined(synapse, approver, approvers_id),
                 "the relay's bot joining the demo room and the approvers' room", 30)
        yield DemoChat(synapse, bot, member, approver, server, room, approvers)


def _disable(server: ChatServer) -> None:
    server.refresh_from_db()
    if server.enabled:
        server.enabled = False
        config_save(server, actor=ACTOR)


def ask(chat: DemoChat, text: str, timeout: float = 30) -> Run:
    """The member says `text` in the demo room; the relay stores it and starts the run: that run."""
    before = set(Message.objects.filter(channel=chat.room).values_list("pk", flat=True))
    event_id = chat.synapse.say(chat.member, chat.room.room_id, text)

    def started() -> Run | None:
        message = (Message.objects.filter(channel=chat.room, external_id=event_id, run__isnull=False)
                   .exclude(pk__in=before).select_related("run").first())
        return message.run if message else None

    return wait_for(started, "the relay turning the demo room's message into a run", timeout)


def approval_post(chat: DemoChat, *, approval=None, proposal=None) -> str:
    """The approvers' room post for this held request or proposal (its event id), once the relay made it."""
    subject = {"approval": approval} if approval is not None else {"proposal": proposal}
    post = ApprovalPost.objects.filter(channel=chat.approvers, **subject).exclude(external_id="").first()
    return post.external_id if post else ""


def approve_in_chat(chat: DemoChat, post_id: str) -> None:
    """The demo approver reacts ✅ on the post, over Matrix, as a person's chat client would."""
    chat.synapse.react(chat.approver, chat.approvers.room_id, post_id, APPROVE)


def replies(chat: DemoChat, run: Run, timeout: float = 60) -> list[str]:
    """The run's answer as it landed in the demo room (the bot's messages there), once delivered."""
    def delivered():
        delivery = Delivery.objects.filter(run=run).first()
        if delivery is not None and delivery.status == Delivery.Status.FAILED:
            raise ChatFailed(f"the reply to the demo room failed: {delivery.last_error}")
        return delivery is not None and delivery.status == Delivery.Status.SENT

    wait_for(delivered, "the relay delivering the run's answer to the demo room", timeout)
    events = chat.synapse.messages(chat.member, chat.room.room_id)
    return [e["content"].get("body", "") for e in events if e.get("sender") == chat.bot.user_id]
