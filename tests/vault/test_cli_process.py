"""The real command line, in its own process: the value goes in on stdin and comes out nowhere."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings

from controlplane.vault import services
from controlplane.vault.models import Secret
from tests.support.procs import REPO
from tests.vault.conftest import VALUE


def manage(args: list[str], stdin: str, key_file) -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "controlplane.settings",
           "DATABASE_URL": f"sqlite:///{django_settings.DATABASES['default']['NAME']}",
           "ROSTER_VAULT_KEY_FILE": str(key_file)}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_secret_set_in_a_real_process(vault_key):
    proc = manage(["secret", "set", "gh", "--kind", "github"], VALUE + "\n", vault_key)
    assert proc.returncode == 0, proc.stderr
    assert VALUE not in proc.stdout and VALUE not in proc.stderr
    secret = Secret.objects.get(name="gh")
    assert services.secret_reveal(secret) == VALUE and secret.sentinel in proc.stdout
    empty = manage(["secret", "set", "other"], "", vault_key)
    assert empty.returncode != 0 and "empty" in empty.stderr
    assert not Secret.objects.filter(name="other").exists()
