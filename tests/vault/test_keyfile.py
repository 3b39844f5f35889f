from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet

from controlplane.vault import keyfile, services
from controlplane.vault.keyfile import VaultKeyError
from tests.support.procs import REPO
from tests.vault.conftest import VALUE


def test_key_file_is_created_0600_on_first_use(vault_key):
    assert not vault_key.exists()
    keyfile.fernet()
    assert stat.S_IMODE(vault_key.stat().st_mode) == 0o600
    Fernet(vault_key.read_bytes().strip())  # holds a real key


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_readable_by_others_is_refused(vault_key, mode):
    keyfile.fernet()
    os.chmod(vault_key, mode)
    with pytest.raises(VaultKeyError, match="chmod 600"):
        keyfile.fernet()
    with pytest.raises(VaultKeyError):
        keyfile.check_key_file()


@pytest.mark.parametrize("content", [b"", b"not a key", b"A" * 44])
def test_malformed_key_is_refused(vault_key, content):
    vault_key.parent.mkdir(parents=True)
    vault_key.write_bytes(content)
    os.chmod(vault_key, 0o600)
    with pytest.raises(VaultKeyError, match="does not hold a Fernet key"):
        keyfile.fernet()


@pytest.mark.django_db
def test_wrong_key_fails_clearly_without_the_value(vault_key):
    secret = services.secret_set("api", VALUE)
    vault_key.write_bytes(Fernet.generate_key())
    keyfile._cache.clear()
    with pytest.raises(services.VaultError) as info:
        services.secret_reveal(secret)
    assert "cannot be decrypted" in str(info.value) and VALUE not in str(info.value)


@pytest.mark.parametrize(("mode", "content", "message"), [
    (0o644, None, "chmod 600"), (0o600, b"garbage", "does not hold a Fernet key"),
])
def test_control_plane_refuses_to_start_with_a_bad_key(tmp_path, mode, content, message):
    key = tmp_path / "vault.key"
    key.write_bytes(content or Fernet.generate_key())
    os.chmod(key, mode)
    env = {**os.environ, "ROSTER_VAULT_KEY_FILE": str(key), "DJANGO_SETTINGS_MODULE": "controlplane.settings"}
    proc = subprocess.run([sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0
    assert "vault key file" in proc.stderr and message in proc.stderr
