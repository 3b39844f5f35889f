from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from controlplane.conversations.models import Channel, ChatIdentity, ChatServer
from controlplane.core.roles import APPROVERS, ensure_roles
from controlplane.fleet.services import worker_create
from controlplane.vault.services import secret_set

BOT = "@roster-bot:roster.test"


@pytest.fixture
def worker(db):
    return worker_create("chat-worker")


@pytest.fixture
def server(db, tmp_path, settings):
    settings.ROSTER_VAULT_KEY_FILE = tmp_path / "vault.key"
    token = secret_set("matrix-bot-token", "syt_bot_token_value_1234567890", kind="generic")
    return ChatServer.objects.create(
        name="hs", homeserver_url="http://127.0.0.1:1", bot_user_id=BOT, access_token=token
    )


@pytest.fixture
def room(server, worker):
    return Channel.objects.create(
        name="ops-room",
        kind="matrix",
        worker=worker,
        server=server,
        room_id="!ops:roster.test",
        owners=["@olga:roster.test"],
    )


@pytest.fixture
def approvers_room(server):
    return Channel.objects.create(
        name="approvers", kind="matrix", purpose="approvals", server=server, room_id="!approvers:roster.test"
    )


def make_user(username: str, *, approver: bool = False, superuser: bool = False, chat_id: str = ""):
    ensure_roles()
    users = get_user_model().objects
    user = (
        users.create_superuser(username, f"{username}@example.org", "pw")
        if superuser
        else users.create_user(username, f"{username}@example.org", "pw")
    )
    if approver:
        user.groups.add(Group.objects.get(name=APPROVERS))
    if chat_id:
        ChatIdentity.objects.create(kind="matrix", chat_id=chat_id, user=user)
    return users.get(pk=user.pk)
