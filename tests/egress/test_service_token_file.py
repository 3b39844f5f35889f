"""The gateway's service-token hash is read when a call is authenticated (cached by the file's mtime), so a
decision API started before `make up` minted the token, or before the token was replaced, accepts the
current token without a restart; anything unreadable or malformed refuses every call."""

from __future__ import annotations

import hashlib
import os
import time

import httpx
import pytest
from django.db import connection

from controlplane.fleet.models import PolicyVersion
from tests.conftest import GATEWAY_SERVICE_TOKEN
from tests.support import procs

HEALTH = "/api/gateway/health"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _write(path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # as scripts/gateway-up.sh would: a new inode, a new mtime


@pytest.fixture
def hash_file(settings, tmp_path, db):
    settings.ROSTER_GATEWAY_TOKEN_SHA256 = ""  # no environment value: the file decides
    path = tmp_path / "gateway-token.sha256"
    settings.ROSTER_GATEWAY_TOKEN_SHA256_FILE = path
    return path


def _status(gateway, token: str) -> int:
    return gateway.get(HEALTH, headers={"Authorization": f"Bearer {token}"}).status_code


def test_a_hash_written_after_start_is_honoured_and_a_new_one_replaces_it(gateway, hash_file):
    assert _status(gateway, GATEWAY_SERVICE_TOKEN) == 401  # no file yet: nobody gets in
    _write(hash_file, _hash(GATEWAY_SERVICE_TOKEN) + "\n")
    assert _status(gateway, GATEWAY_SERVICE_TOKEN) == 200
    _write(hash_file, _hash("gst_the_next_token"))
    assert _status(gateway, GATEWAY_SERVICE_TOKEN) == 401
    assert _status(gateway, "gst_the_next_token") == 200


@pytest.mark.parametrize("content", ["", "not-a-hash", _hash("x")[:63], _hash("x") + "00", "\xff"])
def test_a_malformed_hash_file_refuses_everyone(gateway, hash_file, content):
    _write(hash_file, content)
    assert _status(gateway, GATEWAY_SERVICE_TOKEN) == 401
    assert _status(gateway, "") == 401


def test_an_unreadable_hash_file_refuses_everyone(gateway, hash_file):
    _write(hash_file, _hash(GATEWAY_SERVICE_TOKEN))
    assert _status(gateway, GATEWAY_SERVICE_TOKEN) == 200
    hash_file.unlink()
    hash_file.mkdir()  # exists, but reading it fails
    assert _status(gateway, GATEWAY_SERVICE_TOKEN) == 401


def test_the_environment_value_wins_over_the_file(gateway, hash_file, settings):
    _write(hash_file, _hash("gst_from_the_file"))
    settings.ROSTER_GATEWAY_TOKEN_SHA256 = _hash(GATEWAY_SERVICE_TOKEN)
    assert _status(gateway, GATEWAY_SERVICE_TOKEN) == 200
    assert _status(gateway, "gst_from_the_file") == 401


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_decision_api_process_started_before_the_token_accepts_it_once_minted(tmp_path, redis_url):
    """The first `make up`: the decision API starts, then the gateway's token is minted."""
    PolicyVersion.objects.get_or_create(pk=1)
    hash_file = tmp_path / "gateway-token.sha256"
    env = procs.control_plane_env(connection.settings_dict["NAME"], redis_url, {
        "ROSTER_GATEWAY_TOKEN_SHA256_FILE": str(hash_file), "ROSTER_GATEWAY_TOKEN_SHA256": ""})
    with procs.decision_api_server(env, tmp_path) as url:
        auth = {"Authorization": f"Bearer {GATEWAY_SERVICE_TOKEN}"}
        assert httpx.get(url + HEALTH, headers=auth, timeout=10).status_code == 401
        time.sleep(0.01)
        _write(hash_file, _hash(GATEWAY_SERVICE_TOKEN) + "\n")
        answer = httpx.get(url + HEALTH, headers=auth, timeout=10)
        assert answer.status_code == 200 and answer.json()["ok"] is True
