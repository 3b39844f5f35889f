"""`audit verify`: OK on a sound chain; editing, deleting, inserting and reordering are each detected."""

import json

import pytest
from django.core.management import call_command

from controlplane.audit import chain
from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append
from controlplane.audit.verify import verify_database
from tests.audit import tamper

pytestmark = pytest.mark.django_db


@pytest.fixture
def records():
    recs = [audit_append("decision", {"i": i, "host": "h.example"}, worker="w", verdict="deny",
                         reason="no_grant") for i in range(6)]
    tamper.drop_triggers()
    return recs


def _verify_cli(capsys):
    with pytest.raises(SystemExit) as exc:
        call_command("audit", "verify")
    assert exc.value.code == 1
    return capsys.readouterr().err


def test_sound_chain_verifies_ok(capsys):
    for i in range(4):
        audit_append("decision", {"i": i})
    call_command("audit", "verify")
    out = capsys.readouterr().out
    assert out.startswith("OK: 4 records, head ")
    assert AuditRecord.objects.get(seq=4).hash in out


def test_empty_chain_is_ok():
    assert verify_database().ok and verify_database().checked == 0


def test_edited_body_is_detected(records, capsys):
    tamper.raw("UPDATE audit_auditrecord SET body = REPLACE(body, '\"deny\"', '\"allow\"') WHERE seq = 3")
    err = _verify_cli(capsys)
    assert "seq 3" in err and "hash mismatch" in err
    assert verify_database().broken_seq == 3


def test_edited_body_with_recomputed_hash_breaks_the_next_link(records):
    body = AuditRecord.objects.get(seq=3).body.replace('"deny"', '"allow"')
    tamper.raw("UPDATE audit_auditrecord SET body = %s, hash = %s, verdict = 'allow' WHERE seq = 3",
               [body, chain.record_hash(body)])
    result = verify_database()
    assert not result.ok and result.broken_seq == 4 and "broken link" in result.message


def test_edited_indexed_column_is_detected(records):
    tamper.raw("UPDATE audit_auditrecord SET verdict = 'allow' WHERE seq = 2")
    result = verify_database()
    assert result.broken_seq == 2 and "column 'verdict'" in result.message


def test_deleted_record_is_detected(records, capsys):
    tamper.raw("DELETE FROM audit_auditrecord WHERE seq = 4")
    err = _verify_cli(capsys)
    assert "seq 5" in err and "seq gap" in err


def test_deleted_first_record_is_detected(records):
    tamper.raw("DELETE FROM audit_auditrecord WHERE seq = 1")
    result = verify_database()
    assert result.broken_seq == 2 and "expected seq 1" in result.message


def test_inserted_record_is_detected(records):
    # A well-formed forged record slipped in after seq 3, later records renumbered to make room.
    prev = AuditRecord.objects.get(seq=3)
    tamper.shift_seqs_from(4, 1)
    body = chain.build_body(seq=4, time=prev.created_at, prev=prev.hash, kind="decision", run=None,
                            worker="w", verdict="allow", reason="", data={"forged": True})
    tamper.insert_record(4, body, prev.hash, chain.record_hash(body), prev.created_at, worker="w",
                         verdict="allow")
    result = verify_database()
    assert not result.ok and result.broken_seq == 5, result.message


def test_appended_forgery_is_detected(records):
    head = AuditRecord.objects.get(seq=6)
    body = chain.build_body(seq=7, time=head.created_at, prev="f" * 64, kind="decision", run=None,
                            worker="", verdict="", reason="", data={})
    tamper.insert_record(7, body, "f" * 64, chain.record_hash(body), head.created_at)
    assert verify_database().broken_seq == 7


def test_reordered_records_are_detected(records):
    # Swap the seq numbers of records 2 and 3 (bodies untouched).
    tamper.raw("UPDATE audit_auditrecord SET seq = -2 WHERE seq = 2")
    tamper.raw("UPDATE audit_auditrecord SET seq = 2 WHERE seq = 3")
    tamper.raw("UPDATE audit_auditrecord SET seq = 3 WHERE seq = -2")
    result = verify_database()
    assert result.broken_seq == 2 and "disagrees with the body" in result.message


def test_reordered_rows_with_renumbered_bodies_are_detected(records):
    # A careful attacker swaps records 2 and 3 and rewrites their seq inside the bodies too.
    r2, r3 = AuditRecord.objects.get(seq=2), AuditRecord.objects.get(seq=3)
    tamper.raw("DELETE FROM audit_auditrecord WHERE seq IN (2, 3)")
    for new_seq, rec in ((2, r3), (3, r2)):
        b = json.loads(rec.body)
        b["seq"] = new_seq
        body = chain.canonical_json(b)
        tamper.insert_record(new_seq, body, b["prev"], chain.record_hash(body), rec.created_at,
                             worker="w", verdict="deny")
    result = verify_database()
    assert result.broken_seq == 2 and "broken link" in result.message


def test_verify_reads_in_chunks(settings):
    settings.ROSTER_AUDIT_CHUNK_SIZE = 3
    for i in range(10):
        audit_append("decision", {"i": i})
    result = verify_database()
    assert result.ok and result.checked == 10


def test_anchor_from_an_earlier_verify_detects_records_cut_off_the_end(records, capsys):
    call_command("audit", "verify")
    anchor = capsys.readouterr().out.splitlines()[0].split("head ")[1].strip()
    assert anchor.startswith("6:")
    call_command("audit", "verify", "--anchor", anchor)
    tamper.raw("DELETE FROM audit_auditrecord WHERE seq >= 5")
    call_command("audit", "verify")  # without the anchor a clean cut is invisible ...
    with pytest.raises(SystemExit):
        call_command("audit", "verify", "--anchor", anchor)  # ... with it, it is not
    assert "records were removed from the end" in capsys.readouterr().err


def test_anchor_with_a_different_hash_is_a_mismatch(records):
    result = verify_database(anchor=(3, "0" * 64))
    assert not result.ok and result.broken_seq == 3 and "anchor mismatch" in result.message


def test_bad_anchor_is_a_clear_error():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="SEQ:HASH"):
        call_command("audit", "verify", "--anchor", "abc")


def test_workers_option(records, capsys):
    call_command("audit", "verify", "--workers", "1")
    assert capsys.readouterr().out.startswith("OK: 6 records")
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="whole number"):
        call_command("audit", "verify", "--workers", "-2")


@pytest.mark.parametrize("size", [0, -5])
def test_a_fetch_size_below_one_is_an_error_not_an_empty_chain(records, settings, size):
    settings.ROSTER_AUDIT_CHUNK_SIZE = size
    with pytest.raises(ValueError, match="at least 1"):
        verify_database()
