"""`secret rotate-key`: every secret re-encrypted under a new key, the old key readable until done, audited;
a rotation stopped anywhere leaves every secret readable, and running it again finishes it."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time

import pytest
from cryptography.fernet import Fernet, InvalidToken
from django.core.management import call_command
from django.core.management.base import CommandError

from controlplane.audit.models import AuditRecord
from controlplane.vault import keyfile, rotation, services
from controlplane.vault.models import Secret
from tests.vault.conftest import VALUE
from tests.vault.test_cli_process import manage

VALUES = {f"s{n}": f"{VALUE}-{n}" for n in range(5)}


def _store_all() -> None:
    for name, value in VALUES.items():
        services.secret_set(name, value)


def _key_lines(path) -> list[bytes]:
    return [line for line in path.read_bytes().splitlines() if line.strip()]


def _fresh_reveal(name: str) -> str:
    keyfile._cache.clear()  # as another process would: the key file as it is on disk now
    return services.secret_reveal(Secret.objects.get(name=name))


def _assert_all_readable() -> None:
    assert {name: _fresh_reveal(name) for name in VALUES} == VALUES


@pytest.mark.django_db
def test_rotation_reencrypts_every_secret_under_a_new_key(vault_key):
    _store_all()
    [old_key] = _key_lines(vault_key)
    before = dict(Secret.objects.values_list("name", "ciphertext"))
    sentinels = dict(Secret.objects.values_list("name", "sentinel"))
    result = rotation.rotate_key(by="test")
    [new_key] = _key_lines(vault_key)
    assert new_key != old_key and result.new_key_id == keyfile.key_id(new_key)
    assert result.retired_key_ids == (keyfile.key_id(old_key),) and result.reencrypted == len(VALUES)
    _assert_all_readable()
    for name, ciphertext in Secret.objects.values_list("name", "ciphertext"):
        assert bytes(ciphertext) != bytes(before[name])
        with pytest.raises(InvalidToken):
            Fernet(old_key).decrypt(bytes(ciphertext))
    assert dict(Secret.objects.values_list("name", "sentinel")) == sentinels  # boxes keep working
    services.secret_set("after", "v-after")
    assert Fernet(new_key).decrypt(bytes(Secret.objects.get(name="after").ciphertext)) == b"v-after"


@pytest.mark.django_db
def test_rotation_is_audited_by_key_id_never_by_key_or_value(vault_key):
    _store_all()
    [old_key] = _key_lines(vault_key)
    rotation.rotate_key(by="test")
    [new_key] = _key_lines(vault_key)
    records = list(AuditRecord.objects.filter(kind="vault_key").order_by("seq"))
    assert [r.body.count('"rotation_started"') for r in records] == [1, 0]
    assert records[1].body.count('"rotation_finished"') == 1
    assert keyfile.key_id(new_key) in records[1].body and keyfile.key_id(old_key) in records[1].body
    bodies = "".join(r.body for r in AuditRecord.objects.all())
    for leak in (old_key.decode(), new_key.decode(), *VALUES.values()):
        assert leak not in bodies


@pytest.mark.django_db
def test_a_secret_that_cannot_be_decrypted_stops_the_rotation_before_anything_changes(vault_key):
    _store_all()
    Secret.objects.filter(name="s3").update(ciphertext=Fernet(Fernet.generate_key()).encrypt(b"x"))
    key_file_before = vault_key.read_bytes()
    ciphertexts = dict(Secret.objects.values_list("name", "ciphertext"))
    records = AuditRecord.objects.count()
    with pytest.raises(rotation.RotationError, match=r"1 secret\(s\) cannot be decrypted .*\(s3\); nothing"):
        rotation.rotate_key()
    assert vault_key.read_bytes() == key_file_before
    assert dict(Secret.objects.values_list("name", "ciphertext")) == ciphertexts
    assert AuditRecord.objects.count() == records


@pytest.mark.django_db
def test_a_rotation_stopped_halfway_leaves_every_secret_readable_and_a_rerun_finishes_it(
        vault_key, monkeypatch):
    _store_all()
    [old_key] = _key_lines(vault_key)
    real = rotation._reencrypt_one
    done = []

    def fails_after_two(secret_id):
        if len(done) == 2:
            raise RuntimeError("the database went away")
        done.append(secret_id)
        return real(secret_id)

    monkeypatch.setattr(rotation, "_reencrypt_one", fails_after_two)
    with pytest.raises(RuntimeError):
        rotation.rotate_key()
    lines = _key_lines(vault_key)
    assert len(lines) == 2 and lines[1] == old_key  # the new key first, the old one still readable
    _assert_all_readable()
    monkeypatch.setattr(rotation, "_reencrypt_one", real)
    result = rotation.rotate_key()
    assert result.resumed and _key_lines(vault_key) == [lines[0]]
    _assert_all_readable()
    assert AuditRecord.objects.filter(kind="vault_key", body__contains='"rotation_resumed"').count() == 1


@pytest.mark.django_db
def test_a_secret_written_under_the_old_key_meanwhile_is_reencrypted_before_the_old_key_goes(
        vault_key, monkeypatch):
    _store_all()
    [old_key] = _key_lines(vault_key)
    real = rotation._reencrypt_one
    late = []

    def and_a_late_writer(secret_id):
        out = real(secret_id)
        if not late:  # a process that still held the old key file stores s0 after it was rotated
            first = Secret.objects.order_by("pk").first()
            Secret.objects.filter(pk=first.pk).update(ciphertext=Fernet(old_key).encrypt(b"late-value"))
            late.append(first.name)
        return out

    monkeypatch.setattr(rotation, "_reencrypt_one", and_a_late_writer)
    rotation.rotate_key()
    [new_key] = _key_lines(vault_key)
    assert Fernet(new_key).decrypt(bytes(Secret.objects.get(name=late[0]).ciphertext)) == b"late-value"


@pytest.mark.django_db
def test_a_second_rotation_at_the_same_time_is_refused(vault_key):
    _store_all()
    key_file_before = vault_key.read_bytes()
    lock = vault_key.with_name(vault_key.name + ".lock")
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(CommandError, match="another key rotation"):
            call_command("secret", "rotate-key")
    finally:
        os.close(fd)
    assert vault_key.read_bytes() == key_file_before


@pytest.mark.django_db
def test_the_command_says_what_it_did_and_never_a_value(vault_key, capsys):
    _store_all()
    call_command("secret", "rotate-key")
    out = capsys.readouterr().out
    assert "rotated the vault key: 5 secret(s) re-encrypted" in out
    assert all(v not in out for v in VALUES.values()) and _key_lines(vault_key)[0].decode() not in out


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_rotation_killed_in_its_own_process_leaves_every_secret_readable(vault_key):
    many = {f"k{n}": f"{VALUE}-{n}" for n in range(300)}
    for name, value in many.items():
        services.secret_set(name, value)
    [old_key] = _key_lines(vault_key)
    env_args = ["secret", "rotate-key"]
    proc = subprocess.Popen([sys.executable, "manage.py", *env_args], **_popen_kwargs(vault_key))
    # Kill it once the new key is in the file beside the old one: somewhere in the re-encryption.
    while proc.poll() is None and len(_key_lines(vault_key)) < 2:
        time.sleep(0.001)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the rotation ended before it could be killed"
    lines = _key_lines(vault_key)
    assert len(lines) == 2 and lines[1] == old_key
    for name, value in many.items():
        assert _fresh_reveal(name) == value
    rerun = manage(env_args, "", vault_key)
    assert rerun.returncode == 0, rerun.stderr
    assert "finished the rotation in progress: 300 secret(s)" in rerun.stdout
    assert _key_lines(vault_key) == [lines[0]]
    for name, value in many.items():
        assert _fresh_reveal(name) == value


def _popen_kwargs(key_file) -> dict:
    from django.conf import settings as django_settings

    from tests.support.procs import REPO

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "controlplane.settings",
           "DATABASE_URL": f"sqlite:///{django_settings.DATABASES['default']['NAME']}",
           "ROSTER_VAULT_KEY_FILE": str(key_file)}
    return {"cwd": REPO, "env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
