"""Signed checkpoints: after one, plain `audit verify` catches records cut off the end and a rewrite
re-chained from before it (neither is caught without one); the log and its signatures are checked; a
rotated key keeps old checkpoints verifiable; the standalone export verifier checks an export against the
checkpoint log and the public keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from controlplane.audit import chain, checkpoints
from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append
from tests.audit import tamper
from tests.support.procs import REPO

pytestmark = pytest.mark.django_db
SCRIPT = REPO / "scripts" / "verify_audit_export.py"


def _append(count: int) -> None:
    for i in range(count):
        audit_append("decision", {"i": i, "host": "h.example"}, worker="w", verdict="allow")


def _verify(capsys) -> tuple[int, str]:
    try:
        call_command("audit", "verify")
    except SystemExit as exc:
        return exc.code, capsys.readouterr().err
    return 0, capsys.readouterr().out


def _rechain_from(first_seq: int) -> None:
    """Rewrite every record from `first_seq` on (verdict allow -> deny) and re-chain them so that the
    chain alone is sound again: what an attacker with the database and the hashing rules can do."""
    prev = AuditRecord.objects.get(seq=first_seq - 1).hash
    rows = list(AuditRecord.objects.filter(seq__gte=first_seq).order_by("seq").values_list("seq", "body"))
    tamper.raw("UPDATE audit_auditrecord SET hash = upper(hash) WHERE seq >= %s", [first_seq])
    for seq, body in rows:
        obj = json.loads(body)
        obj["prev"] = prev_hash = prev
        if obj["verdict"] == "allow":
            obj["verdict"] = "deny"
        new_body = chain.canonical_json(obj)
        prev = chain.record_hash(new_body)
        tamper.raw("UPDATE audit_auditrecord SET body = %s, hash = %s, prev_hash = %s, verdict = %s "
                   "WHERE seq = %s", [new_body, prev, prev_hash, obj["verdict"], seq])


def test_deleting_the_last_ten_records_is_caught_after_a_checkpoint(capsys):
    _append(30)
    call_command("audit", "checkpoint")  # signs seq 30; the checkpoint itself is record 31
    _append(5)
    code, out = _verify(capsys)
    assert code == 0 and "checkpoint seq 30" in out and "6 record(s) after it" in out
    tamper.drop_triggers()
    tamper.raw("DELETE FROM audit_auditrecord WHERE seq > 26")
    code, err = _verify(capsys)
    assert code == 1 and "records were removed from the end" in err


def test_without_a_checkpoint_the_same_cut_passes_and_verify_says_so(capsys):
    _append(30)
    tamper.drop_triggers()
    tamper.raw("DELETE FROM audit_auditrecord WHERE seq > 20")
    code, out = _verify(capsys)
    assert code == 0 and "no checkpoint yet" in out


def test_a_rewrite_rechained_from_record_100_is_caught_after_a_checkpoint(capsys):
    _append(120)
    call_command("audit", "checkpoint")
    tamper.drop_triggers()
    _rechain_from(100)
    assert chain.verify_rows(AuditRecord.objects.values_list(*chain.FIELDS)).ok  # sound without anchor
    code, err = _verify(capsys)
    assert code == 1 and "seq 120" in err and "anchor mismatch" in err


def test_the_checkpoint_is_recorded_in_the_chain_and_the_log(capsys):
    _append(3)
    call_command("audit", "checkpoint")
    record = AuditRecord.objects.get(kind="checkpoint")
    data = json.loads(record.body)["data"]
    [line] = settings.ROSTER_AUDIT_CHECKPOINT_LOG.read_text().splitlines()
    entry = json.loads(line)
    assert entry["statement"]["seq"] == 3 == data["seq"] and entry["signature"] == data["signature"]
    assert entry["statement"]["head"] == AuditRecord.objects.get(seq=3).hash
    key = settings.ROSTER_AUDIT_CHECKPOINT_KEY_FILE
    assert oct(key.stat().st_mode & 0o777) == "0o600" and key.read_text().strip() not in record.body


@pytest.mark.parametrize("edit", ["seq", "head", "signature", "garbage"])
def test_an_altered_checkpoint_log_is_reported(capsys, edit):
    _append(5)
    call_command("audit", "checkpoint")
    log = settings.ROSTER_AUDIT_CHECKPOINT_LOG
    entry = json.loads(log.read_text())
    if edit == "seq":
        entry["statement"]["seq"] = 2
    elif edit == "head":
        entry["statement"]["head"] = "0" * 64
    elif edit == "signature":
        tail = "AAA=" if entry["signature"][-4:] != "AAA=" else "BBB="
        entry["signature"] = entry["signature"][:-4] + tail
    log.write_text("not json\n" if edit == "garbage" else json.dumps(entry) + "\n")
    code, err = _verify(capsys)
    assert code == 1 and ("bad signature" in err or "not a checkpoint line" in err), err


def test_a_broken_chain_is_never_signed():
    _append(5)
    tamper.drop_triggers()
    tamper.raw("UPDATE audit_auditrecord SET body = body || ' ' WHERE seq = 2")
    with pytest.raises(CommandError, match="the chain is broken, not signing it"):
        call_command("audit", "checkpoint")
    assert not settings.ROSTER_AUDIT_CHECKPOINT_LOG.exists()


def test_a_key_others_can_read_is_refused():
    _append(1)
    call_command("audit", "checkpoint")
    os.chmod(settings.ROSTER_AUDIT_CHECKPOINT_KEY_FILE, 0o644)
    with pytest.raises(CommandError, match="chmod 600"):
        call_command("audit", "checkpoint")


def test_key_rotation_keeps_old_checkpoints_verifiable(capsys):
    _append(4)
    call_command("audit", "checkpoint")
    call_command("audit", "checkpoint", "--rotate-key")
    keys = checkpoints.public_keys_path().read_text().splitlines()
    entries = [json.loads(line) for line in settings.ROSTER_AUDIT_CHECKPOINT_LOG.read_text().splitlines()]
    assert len(keys) == 2 and entries[0]["statement"]["key"] != entries[1]["statement"]["key"]
    code, out = _verify(capsys)
    assert code == 0 and "checkpoint seq 5" in out
    # Without the old public key, the old checkpoint can no longer be checked: that is reported, not skipped.
    checkpoints.public_keys_path().write_text(keys[1] + "\n")
    code, err = _verify(capsys)
    assert code == 1 and "not in the public keys file" in err


def test_the_beat_schedule_makes_checkpoints():
    from controlplane.audit.tasks import checkpoint

    entry = settings.CELERY_BEAT_SCHEDULE["audit-checkpoint"]
    assert entry["task"] == "controlplane.audit.tasks.checkpoint"
    assert entry["schedule"] == settings.ROSTER_AUDIT_CHECKPOINT_SECONDS
    _append(2)
    assert checkpoint() == 2 and AuditRecord.objects.filter(kind="checkpoint").count() == 1

    from controlplane.celery import app

    app.loader.import_default_modules()
    assert "controlplane.audit.tasks.checkpoint" in app.tasks


def _export(tmp_path, drop_last: int = 0):
    path = tmp_path / "audit.jsonl"
    call_command("audit", "export", "--format", "jsonl", "--output", str(path))
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:len(lines) - drop_last]))
    return path


def _standalone(python: str, path, *extra) -> subprocess.CompletedProcess:
    args = [python, "-I", "-S"] if python == "/usr/bin/python3" else [python]
    return subprocess.run([*args, str(SCRIPT), "--checkpoint", str(settings.ROSTER_AUDIT_CHECKPOINT_LOG),
                           "--public-keys", str(checkpoints.public_keys_path()), *extra, str(path)],
                          capture_output=True, text=True, timeout=60)


def test_the_export_verifier_checks_an_export_against_the_checkpoint(tmp_path):
    _append(20)
    call_command("audit", "checkpoint")
    good = _standalone(sys.executable, _export(tmp_path))
    assert good.returncode == 0 and "checkpoint seq 20" in good.stdout and "signature checked" in good.stdout
    cut = _standalone(sys.executable, _export(tmp_path, drop_last=5))
    assert cut.returncode == 1 and "no record seq 20" in cut.stdout
    tamper.drop_triggers()
    _rechain_from(10)
    rewritten = _standalone(sys.executable, _export(tmp_path))
    assert rewritten.returncode == 1 and "anchor mismatch" in rewritten.stdout


def test_the_export_verifier_without_cryptography_says_so(tmp_path):
    _append(3)
    call_command("audit", "checkpoint")
    path = _export(tmp_path)
    refused = _standalone("/usr/bin/python3", path)
    assert refused.returncode == 2 and "cryptography package is not importable" in refused.stderr
    unsigned = _standalone("/usr/bin/python3", path, "--unsigned-checkpoint")
    assert unsigned.returncode == 0 and "signature NOT checked" in unsigned.stdout
