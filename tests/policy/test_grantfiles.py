from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from controlplane.audit.models import AuditRecord
from controlplane.fleet.models import Worker
from controlplane.policy.grant_services import GRANT_FILES
from controlplane.policy.models import Grant
from controlplane.vault.models import Secret

pytestmark = pytest.mark.django_db

GOOD = {
    "openai-chat.toml": '''
host = "api.openai.com"
methods = ["POST"]
paths = ["/v1/chat/completions"]
secret = "oa"
inject_header = "authorization"
inject_format = "Bearer {secret}"
cost_per_call = 1000
trace = true
max_taint = "secret"
result_class = "private"
''',
    "docs-read.toml": '''
host = "*.python.org"
worker = "w1"
methods = ["GET", "HEAD"]
paths = ["/3/**", "/dev/*"]
mode = "ask"
expires = "2027-01-01T00:00:00Z"
untrusted = true
description = "read the docs"
''',
    "pinned.toml": '''
host = "pinned.example.com"
port = 8443
tunnel = true
''',
    "block.toml": '''
host = "evil.example.com"
mode = "deny"
enabled = false
''',
}


@pytest.fixture(autouse=True)
def refs():
    Worker.objects.create(name="w1")
    Secret.objects.create(name="oa", kind="openai", ciphertext=b"x", sentinel="sk-proj-test")


def write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def run(*args) -> str:
    out = io.StringIO()
    call_command("grants", *map(str, args), stdout=out)
    return out.getvalue()


def test_check_passes_on_good_files(tmp_path):
    assert "4 grant file(s) OK" in run("check", write(tmp_path / "g", GOOD))


def test_check_names_file_and_field_of_every_error(tmp_path):
    d = write(tmp_path / "g", {**GOOD, "bad-one.toml": 'host = "x..y"\nport = 0\nhosts = []\n',
                               "bad-two.toml": 'host = "a.example.com"\nsecret = "oa"\n',
                               "broken.toml": "host = \n", "Bad_Name.toml": 'host = "a.example.com"\n'})
    with pytest.raises(CommandError) as info:
        run("check", d)
    text = str(info.value)
    assert info.value.returncode == 1
    for expected in ["bad-one.toml: host:", "bad-one.toml: port:", "bad-one.toml: hosts: unknown field",
                     "bad-two.toml: inject_header:", "broken.toml: toml:", "Bad_Name.toml: slug:"]:
        assert expected in text, text


def test_import_creates_grants_and_audits_each(tmp_path):
    out = run("import", write(tmp_path / "g", GOOD))
    assert "created: 4" in out
    assert set(Grant.objects.values_list("slug", flat=True)) == {n[:-5] for n in GOOD}
    g = Grant.objects.get(slug="openai-chat")
    assert g.secret.name == "oa" and g.inject_format == "Bearer {secret}" and g.trace
    records = AuditRecord.objects.filter(kind="grant_change")
    assert records.count() == 4 and all('"grants import"' in r.body for r in records)


def test_import_is_all_or_nothing(tmp_path):
    run("import", write(tmp_path / "first", {"docs-read.toml": GOOD["docs-read.toml"]}))
    before = list(Grant.objects.values())
    audit_before = AuditRecord.objects.count()
    changed = GOOD["docs-read.toml"].replace('mode = "ask"', 'mode = "auto"')
    bad = 'host = "a.example.com"\nport = 99999\n'
    d = write(tmp_path / "second", {**GOOD, "docs-read.toml": changed, "zzz-bad.toml": bad})
    with pytest.raises(CommandError, match="nothing imported") as info:
        run("import", d)
    assert "zzz-bad.toml: port:" in str(info.value)
    assert list(Grant.objects.values()) == before and AuditRecord.objects.count() == audit_before


def test_import_rolls_back_when_a_write_fails_midway(tmp_path, monkeypatch):
    from controlplane.audit import edits

    calls = {"n": 0}
    real = edits.audit_append

    def failing(*a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("disk full")
        return real(*a, **k)

    monkeypatch.setattr(edits, "audit_append", failing)
    with pytest.raises(RuntimeError):
        GRANT_FILES.import_dir(write(tmp_path / "g", GOOD))
    assert not Grant.objects.exists() and not AuditRecord.objects.exists()


def test_export_then_import_is_identical(tmp_path):
    run("import", write(tmp_path / "in", GOOD))
    snapshot = list(Grant.objects.order_by("slug").values())
    run("export", tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(GOOD)
    out = run("import", tmp_path / "out")
    assert "unchanged: 4" in out and "updated: 0" in out
    # Into an empty database, the exported files recreate the same grants.
    Grant.objects.all().delete()
    run("import", tmp_path / "out")
    again = list(Grant.objects.order_by("slug").values())
    strip = ("id", "created_at", "updated_at")
    assert [{k: v for k, v in g.items() if k not in strip} for g in again] == [
        {k: v for k, v in g.items() if k not in strip} for g in snapshot]
    # and exporting again writes the same bytes
    run("export", tmp_path / "out2")
    for name in GOOD:
        assert (tmp_path / "out" / name).read_text() == (tmp_path / "out2" / name).read_text()


def test_import_update_and_prune(tmp_path):
    run("import", write(tmp_path / "a", GOOD))
    changed = GOOD["pinned.toml"].replace("8443", "9443")
    out = run("import", write(tmp_path / "b", {"pinned.toml": changed}), "--prune")
    assert "updated: 1" in out and "deleted: 3" in out
    assert list(Grant.objects.values_list("slug", "port")) == [("pinned", 9443)]
    assert AuditRecord.objects.filter(kind="grant_change").count() == 4 + 1 + 3


def test_check_on_a_missing_directory_fails(tmp_path):
    with pytest.raises(CommandError, match="not a directory"):
        run("check", tmp_path / "nope")


def test_oversized_file_is_refused(tmp_path, settings):
    settings.ROSTER_GRANT_FILE_MAX_BYTES = 100
    d = write(tmp_path / "g", {"big.toml": 'host = "a.example.com"\n' + "# pad\n" * 50})
    with pytest.raises(CommandError, match="big.toml: file: larger than 100 bytes"):
        run("check", d)


def test_export_refuses_a_slug_that_is_not_a_file_name(tmp_path):
    Grant.objects.create(slug="../escape", host="a.example.com")
    with pytest.raises(CommandError, match="cannot be a file name"):
        run("export", tmp_path / "out")
    assert not (tmp_path / "escape.toml").exists()
