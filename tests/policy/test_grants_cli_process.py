"""`manage.py grants check` in its own process: exit status and one line per file and field."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings

from tests.support.procs import REPO


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_check_exits_non_zero_naming_file_and_field(tmp_path):
    (tmp_path / "ok.toml").write_text('host = "api.example.com"\n')
    (tmp_path / "bad.toml").write_text('host = "api.example.com:8443"\nmethods = ["get"]\nextra = 1\n')
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "controlplane.settings",
           "DATABASE_URL": f"sqlite:///{django_settings.DATABASES['default']['NAME']}"}
    proc = subprocess.run([sys.executable, "manage.py", "grants", "check", str(tmp_path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    for field in ("host", "methods", "extra"):
        assert f"bad.toml: {field}:" in proc.stderr, proc.stderr
    assert "ok.toml" not in proc.stderr
    (tmp_path / "bad.toml").unlink()
    ok = subprocess.run([sys.executable, "manage.py", "grants", "check", str(tmp_path)], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "1 grant file(s) OK" in ok.stdout
