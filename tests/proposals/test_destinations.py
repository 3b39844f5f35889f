"""Destinations: one validator for admin, files and CLI; every change audited; TOML round trip."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from controlplane.audit.models import AuditRecord
from controlplane.core.errors import ValidationFailed
from controlplane.proposals.models import Destination
from controlplane.proposals.services import DESTINATION_FILES
from controlplane.proposals.validation import validate_destination
from controlplane.vault import services as vault_services

pytestmark = pytest.mark.django_db

FILES = {
    "hooks.toml": 'kind = "webhook"\nurl = "https://hooks.example.com/in"\nmethod = "POST"\n'
    'secret = "whsec"\nsecret_header = "X-Signature"\nheaders = { X-Source = "roster" }\n',
    "mail.toml": 'kind = "smtp"\nsmtp_host = "smtp.example.com"\nsmtp_port = 587\nstarttls = true\n'
    'login = "roster"\nsecret = "smtp"\nfrom_address = "bot@example.com"\n'
    'allowed_recipients = ["ops@example.com", "@example.org"]\ndaily_limit = 5\n',
    "repo.toml": 'kind = "git"\nurl = "https://git.example.com/team/repo.git"\nbranch_pattern = "roster/*"\n'
    'protected_branches = ["main", "release/*"]\nmax_taint = "secret"\n',
}


@pytest.fixture
def secrets_present():
    vault_services.secret_set("whsec", "whsec-value-1234567")
    vault_services.secret_set("smtp", "smtp-value-1234567")


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"kind": "ftp"}, "kind"),
        ({"kind": "webhook", "url": "ftp://x"}, "url"),
        ({"kind": "webhook", "url": "https://u:p@x.example/"}, "url"),
        ({"kind": "webhook", "url": "https://x.example/", "method": "GET"}, "method"),
        ({"kind": "webhook", "url": "https://x.example/", "smtp_host": "x"}, "smtp_host"),
        ({"kind": "webhook", "url": "https://x.example/", "headers": {"Host": "evil"}}, "headers"),
        ({"kind": "webhook", "url": "https://x.example/", "secret_header": "X-Sig"}, "secret_header"),
        ({"kind": "smtp", "smtp_host": "h", "from_address": "nope"}, "from_address"),
        (
            {"kind": "smtp", "smtp_host": "h", "from_address": "a@b.co", "allowed_recipients": ["x"]},
            "allowed_recipients",
        ),
        ({"kind": "smtp", "smtp_host": "h", "from_address": "a@b.co", "login": "u"}, "login"),
        (
            {"kind": "git", "url": "https://g.example/r.git", "protected_branches": ["a b"]},
            "protected_branches",
        ),
        ({"kind": "git", "url": "https://g.example/r.git", "secret": "missing"}, "secret"),
        ({"kind": "git", "url": "https://g.example/r.git", "max_taint": "top"}, "max_taint"),
        ({"kind": "git", "url": "https://g.example/r.git", "cost_micro": -1}, "cost_micro"),
    ],
)
def test_bad_destinations_name_the_field(data, field):
    with pytest.raises(ValidationFailed) as exc:
        validate_destination(data, name="d1")
    assert field in exc.value.errors


def test_files_import_export_round_trip_and_audit(tmp_path, secrets_present):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    out = io.StringIO()
    call_command("destinations", "import", str(tmp_path), stdout=out)
    assert "created: 3" in out.getvalue()
    assert Destination.objects.count() == 3
    records = AuditRecord.objects.filter(kind="grant_change")
    assert records.count() == 3 and all('"object":"destination"' in r.body for r in records)
    assert not any("whsec-value" in r.body or "smtp-value" in r.body for r in records)
    exported = tmp_path / "out"
    call_command("destinations", "export", str(exported), stdout=io.StringIO())
    assert sorted(p.name for p in exported.iterdir()) == sorted(FILES)
    out = io.StringIO()
    call_command("destinations", "import", str(exported), stdout=out)
    assert "unchanged: 3" in out.getvalue()
    assert AuditRecord.objects.filter(kind="grant_change").count() == 3
    listing = io.StringIO()
    call_command("destinations", "list", stdout=listing)
    assert "hooks\twebhook" in listing.getvalue() and "whsec-value" not in listing.getvalue()


def test_one_bad_file_imports_nothing(tmp_path, secrets_present):
    (tmp_path / "hooks.toml").write_text(FILES["hooks.toml"])
    (tmp_path / "bad.toml").write_text('kind = "webhook"\nurl = "https://x.example/"\nsurprise = 1\n')
    with pytest.raises(CommandError) as exc:
        call_command("destinations", "import", str(tmp_path), stdout=io.StringIO())
    assert "bad.toml: surprise" in str(exc.value)
    assert Destination.objects.count() == 0
    assert not AuditRecord.objects.filter(kind="grant_change").exists()


def test_prune_deletes_destinations_without_file(tmp_path, secrets_present):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    DESTINATION_FILES.import_dir(tmp_path)
    (tmp_path / "repo.toml").unlink()
    summary = DESTINATION_FILES.import_dir(tmp_path, prune=True)
    assert summary["deleted"] == ["repo"]
    assert not Destination.objects.filter(name="repo").exists()
