"""A channel's Matrix room id, checked when it is saved: both shapes a homeserver hands out are accepted
(`!opaque:server`, and a version 12 room's `!` + 43 URL-safe base64 characters, what the Synapse the tests
and `make demo` run creates); anything else is a clear error and nothing is saved or audited."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from controlplane.audit.models import AuditRecord
from controlplane.conversations.config_services import channel_problems, config_save
from controlplane.conversations.models import Channel

V12_ROOM = "!I6LvEAZPrfjIs8UZYuZF6X5QGLFGQx2SKxnfE_IAIec"  # as Synapse 1.163 made it


def _channel(server, worker, room_id) -> Channel:
    return Channel(name="demo-room", kind="matrix", worker=worker, server=server, room_id=room_id)


@pytest.mark.parametrize("room_id", ["!ops:roster.test", "!abc123:example.org:8448", V12_ROOM])
def test_a_room_id_a_homeserver_hands_out_is_accepted(server, worker, room_id):
    channel = _channel(server, worker, room_id)
    assert "room_id" not in channel_problems(channel)
    config_save(channel, actor="test")
    assert Channel.objects.get(name="demo-room").room_id == room_id


@pytest.mark.parametrize("room_id", ["", "ops", "#ops:roster.test", "!", "!:roster.test", "!ops:",
                                     V12_ROOM[:-1], V12_ROOM + "A", V12_ROOM[:-1] + "=", "!ops room:x",
                                     V12_ROOM + "\n"])
def test_anything_else_is_refused_with_nothing_saved(server, worker, room_id):
    before = AuditRecord.objects.filter(kind="channel_change").count()
    with pytest.raises(ValidationError) as refused:
        config_save(_channel(server, worker, room_id), actor="test")
    assert "a Matrix room id" in str(refused.value)
    assert not Channel.objects.filter(name="demo-room").exists()
    assert AuditRecord.objects.filter(kind="channel_change").count() == before
