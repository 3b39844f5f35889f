"""Issue 27.12, the auditor's command line in its own process: `audit export … | head` ends quietly (a
reader that stopped is not an error), and a malformed option is a usage line and one error line, never a
traceback."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings

from controlplane.audit import chain
from controlplane.audit.models import AuditRecord
from tests.support.procs import REPO

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _env() -> dict:
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            "DATABASE_URL": f"sqlite:///{django_settings.DATABASES['default']['NAME']}"}


def _manage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=_env(), capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_into_a_reader_that_stops_ends_quietly(fmt):
    AuditRecord.objects.bulk_create(
        [AuditRecord(seq=s, created_at=t, kind=k, body=b, prev_hash=p, hash=h)
         for s, t, k, b, p, h in chain.generate_chain(3000, dt.datetime.now(dt.UTC))], batch_size=1000)
    # `manage.py audit export | head -n 1`: far more than a pipe buffer, and the reader leaves early.
    export = subprocess.Popen([sys.executable, "manage.py", "audit", "export", "--format", fmt], cwd=REPO,
                              env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = subprocess.run(["head", "-n", "1"], stdin=export.stdout, capture_output=True, timeout=120)
    export.stdout.close()  # only head holds the pipe now: its exit is the reader going away
    _out, err = export.communicate(timeout=120)
    assert head.stdout.count(b"\n") == 1
    assert err == b"" and export.returncode == 0, err[-2000:]


@pytest.mark.parametrize(("args", "named"), [
    (("verify", "--anchor", "5:deadbeef"), "argument --anchor: '5:deadbeef' is not SEQ:HASH"),
    (("verify", "--anchor", "5:" + "z" * 64), "argument --anchor"),
    (("verify", "--workers", "many"), "argument --workers: 'many' is not a whole number"),
    (("export", "--since", "yesterday"), "argument --since: not an ISO 8601 time: 'yesterday'"),
])
def test_a_malformed_option_is_a_usage_error_not_a_traceback(args, named):
    proc = _manage("audit", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "Traceback" not in proc.stderr and named in proc.stderr
    assert proc.stderr.startswith("usage: manage.py audit ")
    assert proc.stderr.strip().splitlines()[-1].startswith(f"manage.py audit {args[0]}: error: ")
