"""A real Synapse (tools/synapse) and the real relay process (python -m controlplane.relay) against the
test database, with real Redis for the runs it queues. Users register with the shared-secret API; the bot's
access token goes into the vault like an operator's would."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from django.db import connections

from controlplane.conversations.models import Channel, ChatIdentity, ChatServer
from controlplane.core.roles import APPROVERS, ensure_roles
from tests.support import procs
from tools.synapse.homeserver import Homeserver, MatrixUser, homeserver


@dataclass
class People:
    bot: MatrixUser
    ana: MatrixUser  # a team member
    bob: MatrixUser  # an approver (linked to a Roster user in the Approvers group)
    root: MatrixUser  # the admin (linked to a superuser)
    mallory: MatrixUser  # in every room, linked to nobody


@pytest.fixture(scope="session")
def synapse(tmp_path_factory):
    with homeserver(tmp_path_factory.mktemp("synapse")) as server:
        yield server


@pytest.fixture(scope="session")
def people(synapse: Homeserver) -> People:
    users = {name: synapse.register(name) for name in ("roster-bot", "ana", "bob", "root", "mallory")}
    for name, user in users.items():
        synapse.set_name(user, name.capitalize())
    return People(
        bot=users["roster-bot"],
        ana=users["ana"],
        bob=users["bob"],
        root=users["root"],
        mallory=users["mallory"],
    )


class RelayProcess:
    """The relay as `make up` runs it, which a test may kill hard (SIGKILL) and start again."""

    def __init__(self, env: dict[str, str], tmp: Path):
        self.env, self.tmp, self.proc, self.port = env, tmp, None, 0

    def start(self):
        self.port = procs.free_port()
        self.proc = procs.spawn(
            [procs.VENV_PY, "-m", "controlplane.relay", "--port", str(self.port)],
            env=self.env,
            log=self.tmp / "relay.log",
        )
        procs.wait_for_port(self.port, proc=self.proc, timeout=30)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self):
        if self.proc is not None:
            procs.stop(self.proc)

    def health(self) -> dict:
        return httpx.get(self.url + "/healthz", timeout=5).json()

    def log(self) -> str:
        path = self.tmp / "relay.log"
        return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture
def relay_env(transactional_db, redis_url, settings, tmp_path):
    db_name = connections["default"].settings_dict["NAME"]
    vault_key = tmp_path / "vault.key"
    settings.ROSTER_VAULT_KEY_FILE = vault_key
    # A Redis database no dispatcher reads: the box suites' session-wide Celery workers serve redis_url, and
    # these tests play the run lifecycle themselves (a real dispatch would refuse the run first: no grant).
    quiet_broker = redis_url.rsplit("/", 1)[0] + "/7"
    return procs.control_plane_env(
        db_name,
        quiet_broker,
        {
            "ROSTER_VAULT_KEY_FILE": str(vault_key),
            "ROSTER_RELAY_POLL_SECONDS": "0.2",
            "ROSTER_RELAY_SYNC_TIMEOUT_MS": "1000",
            "ROSTER_RELAY_BACKOFF_SECONDS": "0.2",
            "ROSTER_LOG_LEVEL": "INFO",
        },
    )


@pytest.fixture
def relay(relay_env, tmp_path):
    process = RelayProcess(relay_env, tmp_path)
    try:
        yield process
    finally:
        process.stop()


def link(user, chat_user: MatrixUser) -> None:
    ChatIdentity.objects.create(kind="matrix", chat_id=chat_user.user_id, user=user)


def roster_users(people: People):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    ensure_roles()
    users = get_user_model().objects
    bob = users.create_user("bob", "bob@example.org", "pw")
    bob.groups.add(Group.objects.get(name=APPROVERS))
    root = users.create_superuser("root", "root@example.org", "pw")
    link(bob, people.bob)
    link(root, people.root)
    return users.get(pk=bob.pk), users.get(pk=root.pk)


@dataclass
class Rooms:
    server: ChatServer
    conversation: Channel
    approvers: Channel


def matrix_rooms(synapse: Homeserver, people: People, worker, secret_set) -> Rooms:
    """A conversation room and an approvers' room, made by Ana and Bob, the bot invited (it joins when the
    relay sees the invite), everyone in both."""
    everyone = [people.bot.user_id, people.bob.user_id, people.root.user_id, people.mallory.user_id]
    conversation = synapse.create_room(people.ana, everyone, "ops")
    approvers = synapse.create_room(
        people.bob, [people.bot.user_id, people.root.user_id, people.mallory.user_id], "approvers"
    )
    for user in (people.bob, people.root, people.mallory):
        synapse.join(user, conversation)
    for user in (people.root, people.mallory):
        synapse.join(user, approvers)
    token = secret_set("matrix-bot", people.bot.access_token)
    server = ChatServer.objects.create(
        name="synapse", homeserver_url=synapse.url, bot_user_id=people.bot.user_id, access_token=token
    )
    return Rooms(
        server=server,
        conversation=Channel.objects.create(
            name="ops", kind="matrix", worker=worker, server=server, room_id=conversation
        ),
        approvers=Channel.objects.create(
            name="approvers", kind="matrix", purpose="approvals", server=server, room_id=approvers
        ),
    )


def wait_until(predicate, timeout: float = 30.0, what: str = "condition", relay: RelayProcess | None = None):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = relay.log()[-3000:] if relay else ""
            raise AssertionError(f"{what} not met after {timeout}s\n{tail}")
        time.sleep(0.2)


def bot_messages(synapse: Homeserver, viewer: MatrixUser, room_id: str, bot: MatrixUser) -> list[dict]:
    return [e for e in synapse.messages(viewer, room_id) if e["sender"] == bot.user_id]
