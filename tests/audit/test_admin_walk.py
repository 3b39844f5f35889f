"""Issue 24.5: every admin edit is on the record. One walk through the real admin (its add, change and
delete forms, filled from the pages themselves) of every admin-editable model — workers, grants, secrets
by name, caps, prices, destinations, trust rules, chat servers, channels, chat identities, presets and
workers' agents — asserting each edit is one audit record naming who made it, the old and new values
(credential-like ones masked) and, in its worker column, the worker it concerns."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
import tomli_w
from django.contrib.auth.models import User

from controlplane.agents.models import Preset, WorkerAgent
from controlplane.audit.edits import MASKED
from controlplane.audit.models import AuditRecord
from controlplane.conversations.models import Channel, ChatIdentity, ChatServer
from controlplane.fleet.models import Worker
from controlplane.ledger.models import Cap, ModelPrice
from controlplane.policy.models import Grant
from controlplane.proposals.models import Destination, TrustRule
from controlplane.vault.models import Secret
from controlplane.vault.services import secret_set
from tests.audit.admin_forms import filled
from tests.presets.conftest import preset_data

pytestmark = pytest.mark.django_db
ADMIN = "walk-admin"
SECRET_VALUE = "sk-walk-SECRETvalue-0123456789"
NEW_SECRET_VALUE = "sk-walk-NEWvalue-9876543210"


@dataclass
class Walk:
    """One model's walk: its admin path, what the add form is given, what the change alters (one field,
    its record key and the values the record must show before and after), the audit kind, and the worker
    its records must name."""

    path: str
    model: type
    add: dict
    change: dict
    changed_key: str
    old: object
    new: object
    kind: str
    worker: str = ""
    form: str = ""
    lookup: dict = field(default_factory=dict)


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create(username=ADMIN, is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def world(db, settings, tmp_path):
    settings.ROSTER_VAULT_KEY_FILE = tmp_path / "vault.key"
    worker = Worker.objects.create(name="walker")
    token = secret_set("walk-bot-token", "syt_walk_bot_token_0123456789")
    server = ChatServer.objects.create(name="walk-hs", homeserver_url="http://127.0.0.1:1",
                                       bot_user_id="@bot:walk.test", access_token=token)
    smtp = Destination.objects.create(name="walk-mail", kind="smtp", smtp_host="smtp.example.com",
                                      smtp_port=25, from_address="bot@example.com",
                                      allowed_recipients=["ops@example.com"])
    person = User.objects.create(username="walk-person")
    return {"worker": worker, "server": server, "smtp": smtp, "person": person}


def _walks(world) -> list[Walk]:
    worker, server, smtp, person = world["worker"], world["server"], world["smtp"], world["person"]
    w = str(worker.pk)
    preset = tomli_w.dumps(preset_data(slug="walk-preset", image="", build="", title="Walk one"))
    return [
        Walk("fleet/worker", Worker,
             {"name": "walker-two", "description": "d", "identity": "I am careful."},
             {"identity": "I am very careful."}, "identity", "I am careful.", "I am very careful.",
             "worker_change", worker="walker-two", lookup={"name": "walker-two"}),
        Walk("policy/grant", Grant, {"slug": "walk-grant", "worker": w, "host": "api.example.com",
                                     "schemes": "https", "methods": "GET", "paths": "/v1/**"},
             {"mode": "ask"}, "mode", "auto", "ask", "grant_change", worker="walker",
             lookup={"slug": "walk-grant"}),
        Walk("vault/secret", Secret, {"name": "walk-key", "kind": "generic", "value": SECRET_VALUE},
             {"value": NEW_SECRET_VALUE}, "value", MASKED, MASKED, "secret_change",
             lookup={"name": "walk-key"}),
        Walk("ledger/cap", Cap, {"worker": w, "unit": "requests", "window": "day", "limit": "10"},
             {"limit": "20"}, "limit", 10, 20, "cap_change", worker="walker", lookup={"worker": worker}),
        Walk("ledger/modelprice", ModelPrice, {"pattern": "walk-model*", "max_output_tokens": "1000",
                                               "input_micro_per_million__currency": "2.5",
                                               "cached_input_micro_per_million__currency": "1.25",
                                               "output_micro_per_million__currency": "10"},
             {"output_micro_per_million__currency": "12"}, "output_micro_per_million", 10_000_000,
             12_000_000, "grant_change", lookup={"pattern": "walk-model*"}),
        Walk("proposals/destination", Destination, {"name": "walk-hook", "kind": "webhook",
                                                    "url": "https://hooks.example/walk-TOKEN-abc123",
                                                    "method": "POST", "max_taint": "1", "daily_limit": "3"},
             {"daily_limit": "5"}, "daily_limit", 3, 5, "grant_change", lookup={"name": "walk-hook"}),
        Walk("proposals/trustrule", TrustRule, {"name": "walk-rule", "worker": w, "destination": str(smtp.pk),
                                                "kind": "email", "max_per_day": "5", "enabled": "on"},
             {"max_per_day": "7"}, "max_per_day", 5, 7, "grant_change", worker="walker",
             lookup={"name": "walk-rule"}),
        Walk("conversations/chatserver", ChatServer,
             {"name": "walk-hs-two", "homeserver_url": "http://127.0.0.1:2",
                                                      "bot_user_id": "@bot2:walk.test",
                                                      "access_token": str(server.access_token_id),
                                                      "enabled": "on"},
             {"homeserver_url": "http://127.0.0.1:3"}, "homeserver_url", "http://127.0.0.1:2",
             "http://127.0.0.1:3", "channel_change", lookup={"name": "walk-hs-two"}),
        Walk("conversations/channel", Channel,
             {"name": "walk-room", "kind": "matrix", "purpose": "conversation",
                                                "worker": w, "enabled": "on", "server": str(server.pk),
                                                "room_id": "!walk:walk.test", "owners": "[]",
                                                "max_message_chars": "4000"},
             {"room_id": "!walk2:walk.test"}, "room_id", "!walk:walk.test", "!walk2:walk.test",
             "channel_change", worker="walker", lookup={"name": "walk-room"}),
        Walk("conversations/chatidentity", ChatIdentity, {"chat_id": "@walk:walk.test", "kind": "matrix",
                                                          "user": str(person.pk)},
             {"chat_id": "@walk2:walk.test"}, "chat_id", "@walk:walk.test", "@walk2:walk.test",
             "channel_change", lookup={"user": person}),
        Walk("agents/preset", Preset, {"definition": preset},
             {"definition": preset.replace("Walk one", "Walk two")}, "title", "Walk one", "Walk two",
             "agent_change", lookup={"slug": "walk-preset"}),
        Walk("agents/workeragent", WorkerAgent,
             {"worker": w, "preset": str(Preset.objects.get(slug="reference").pk), "model": "walk-model-a"},
             {"model": "walk-model-b"}, "model", "walk-model-a", "walk-model-b", "agent_change",
             worker="walker", lookup={"worker": worker}),
    ]


def _new_records(since: int, kind: str) -> list[tuple[AuditRecord, dict]]:
    return [(r, json.loads(r.body)["data"]) for r in AuditRecord.objects.filter(seq__gt=since, kind=kind)
            .order_by("seq")]


def _head() -> int:
    last = AuditRecord.objects.order_by("-seq").first()
    return last.seq if last else 0


def _values(data: dict, which: str) -> dict:
    values = data.get(which) or {}
    return values.get("spec", values) if isinstance(values, dict) else {}


def _post(admin_client, url: str, walk: Walk, values: dict):
    form_id = walk.form or f"{walk.model._meta.model_name}_form"
    response = admin_client.post(url, filled(admin_client, url, form_id, values))
    assert response.status_code == 302, (walk.path, response.content.decode()[-3000:])


def test_every_admin_form_edit_is_one_record_with_who_old_new_and_its_worker(admin_client, world):
    walks = _walks(world)
    for walk in walks:
        base = f"/admin/{walk.path}/"
        before = _head()
        _post(admin_client, base + "add/", walk, walk.add)
        obj = walk.model.objects.get(**walk.lookup)
        [(created, data)] = _new_records(before, walk.kind)
        assert data.get("by") == ADMIN, (walk.path, data)
        assert created.worker_name == walk.worker, (walk.path, created.worker_name)
        assert data.get("before") is None, (walk.path, data)

        before = _head()
        _post(admin_client, f"{base}{obj.pk}/change/", walk, walk.change)
        [(changed, data)] = _new_records(before, walk.kind)
        assert data.get("by") == ADMIN and changed.worker_name == walk.worker, (walk.path, data)
        old, new = _values(data, "before"), _values(data, "after")
        seen = (old.get(walk.changed_key), new.get(walk.changed_key))
        assert seen == (walk.old, walk.new), (walk.path, data)
        if "changed" in data:
            assert walk.changed_key in data["changed"] or "spec" in data["changed"], (walk.path, data)

        before = _head()
        obj = walk.model.objects.get(pk=obj.pk)
        response = admin_client.post(f"{base}{obj.pk}/delete/", {"post": "yes"})
        assert response.status_code == 302, (walk.path, response.content.decode()[-2000:])
        assert not walk.model.objects.filter(pk=obj.pk).exists(), walk.path
        [(deleted, data)] = _new_records(before, walk.kind)
        assert data.get("by") == ADMIN and deleted.worker_name == walk.worker, (walk.path, data)
        assert data.get("before"), (walk.path, data)
    bodies = "\n".join(AuditRecord.objects.values_list("body", flat=True))
    for value in (SECRET_VALUE, NEW_SECRET_VALUE, "walk-TOKEN-abc123", "syt_walk_bot_token"):
        assert value not in bodies, value


def test_the_walk_covers_every_admin_editable_model(world):
    """A Roster model the admin lets anyone add, change or delete is walked above; the rest are read-only.
    (Django's users and groups and django-axes' login records are not Roster's configuration.)"""
    from django.contrib import admin

    walked = {w.model for w in _walks(world)}
    request = type("R", (), {"user": User(is_superuser=True, is_staff=True, is_active=True)})()
    editable = set()
    for model, model_admin in admin.site._registry.items():
        if not model.__module__.startswith("controlplane."):
            continue
        if (model_admin.has_add_permission(request) or model_admin.has_change_permission(request)
                or model_admin.has_delete_permission(request)):
            editable.add(model)
    assert editable - walked == set(), sorted(m.__name__ for m in editable - walked)
