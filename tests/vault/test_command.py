from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from controlplane.audit.models import AuditRecord
from controlplane.vault import services
from controlplane.vault.models import Secret
from tests.vault.conftest import VALUE

pytestmark = pytest.mark.django_db


def run(monkeypatch, stdin: str, *args) -> str:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    out, err = io.StringIO(), io.StringIO()
    call_command("secret", *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def test_set_reads_stdin_and_never_echoes(monkeypatch):
    output = run(monkeypatch, VALUE + "\n", "set", "gh", "--kind", "github")
    secret = Secret.objects.get(name="gh")
    assert services.secret_reveal(secret) == VALUE  # trailing newline dropped
    assert VALUE not in output and secret.sentinel in output
    listing = run(monkeypatch, "", "list")
    assert "gh\tgithub\t" in listing and VALUE not in listing
    assert all(VALUE not in r.body for r in AuditRecord.objects.all())


@pytest.mark.parametrize("stdin", ["", "\n"])
def test_empty_value_is_refused(monkeypatch, stdin):
    with pytest.raises(CommandError, match="empty"):
        run(monkeypatch, stdin, "set", "gh")
    assert not Secret.objects.exists()


def test_invalid_value_error_does_not_echo(monkeypatch):
    with pytest.raises(CommandError) as info:
        run(monkeypatch, VALUE + "\nsecond line\n", "set", "gh")
    assert VALUE not in str(info.value)
    assert not Secret.objects.exists()
