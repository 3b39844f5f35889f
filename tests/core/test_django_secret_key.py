"""The Django SECRET_KEY is never a known default: from the environment, else a random key made once
in a 0600 file and reused."""

import os
import stat
import subprocess
import sys

from tests.support.procs import REPO

PRINT_KEY = "import controlplane.settings as s; print(s.SECRET_KEY)"


def _key(var_dir, **env) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ROSTER_DJANGO_SECRET_KEY")}
    out = subprocess.run([sys.executable, "-c", PRINT_KEY], cwd=REPO, capture_output=True, text=True,
                         env={**clean, "ROSTER_VAR_DIR": str(var_dir), **env}, check=True, timeout=60)
    return out.stdout.strip()


def test_key_is_made_once_private_and_reused(tmp_path):
    first = _key(tmp_path)
    key_file = tmp_path / "django-secret.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert len(first) >= 50 and "dev-only" not in first
    assert _key(tmp_path) == first
    assert _key(tmp_path / "elsewhere") != first


def test_environment_wins_and_writes_no_file(tmp_path):
    key = "from-the-environment-" + "k" * 40
    assert _key(tmp_path, ROSTER_DJANGO_SECRET_KEY=key) == key
    assert not (tmp_path / "django-secret.key").exists()


def test_an_empty_key_file_is_refused(tmp_path):
    (tmp_path / "django-secret.key").write_text("")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ROSTER_DJANGO_SECRET_KEY")}
    proc = subprocess.run([sys.executable, "-c", PRINT_KEY], cwd=REPO, capture_output=True, text=True,
                          env={**clean, "ROSTER_VAR_DIR": str(tmp_path)}, timeout=60)
    assert proc.returncode != 0 and "is empty" in proc.stderr
