"""`audit export`: filters, CSV safe for spreadsheets, JSONL with stored bodies checked by the
standalone verifier (run with a Python that has no Django), streaming in constant memory."""

import csv
import datetime as dt
import io
import json
import subprocess
import sys
import tracemalloc
import types
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from controlplane.audit import chain
from controlplane.audit.export import csv_rows, filtered_records, jsonl_lines, neutralise
from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append
from tests.audit import tamper

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "verify_audit_export.py"


def _export(*args) -> str:
    out = io.StringIO()
    call_command("audit", "export", *args, stdout=out)
    return out.getvalue()


def _standalone(path: Path, *extra) -> subprocess.CompletedProcess:
    # -I -S: isolated, no site-packages, so Django can't be imported even by accident.
    return subprocess.run(["/usr/bin/python3", "-I", "-S", str(SCRIPT), *extra, str(path)],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def mixed():
    audit_append("decision", {"i": 1}, worker="alpha", run=11, verdict="allow")
    audit_append("decision", {"i": 2}, worker="beta", run=12, verdict="deny", reason="no_grant")
    audit_append("spend", {"i": 3}, worker="alpha", run=11)
    audit_append("approval", {"i": 4, "note": "=HYPERLINK(\"http://evil\")"}, worker="alpha", verdict="deny")


@pytest.mark.parametrize(("args", "expected"), [
    ((), [1, 2, 3, 4]),
    (("--worker", "alpha"), [1, 3, 4]),
    (("--run", "11"), [1, 3]),
    (("--kind", "decision"), [1, 2]),
    (("--verdict", "deny"), [2, 4]),
    (("--worker", "alpha", "--verdict", "deny"), [4]),
    (("--worker", "nobody"), []),
])
def test_jsonl_filters(mixed, args, expected):
    lines = _export("--format", "jsonl", *args).splitlines()
    assert [json.loads(ln)["seq"] for ln in lines] == expected


def test_time_filters(mixed):
    t3 = AuditRecord.objects.get(seq=3).created_at
    later = (t3 + dt.timedelta(days=1)).isoformat()
    assert _export("--until", later).count("\n") == 4
    assert _export("--since", later) == ""
    assert [json.loads(ln)["seq"] for ln in _export("--since", t3.isoformat()).splitlines()][0] <= 3


def test_bad_time_filter_is_a_clear_error(mixed):
    with pytest.raises(CommandError, match="ISO 8601"):
        call_command("audit", "export", "--since", "yesterday-ish")


def test_jsonl_carries_exact_stored_body_and_hash(mixed):
    for line, rec in zip(_export().splitlines(), AuditRecord.objects.order_by("seq"), strict=True):
        entry = json.loads(line)
        assert entry["body"] == rec.body and entry["hash"] == rec.hash


@pytest.mark.parametrize("cell", ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"])
def test_neutralise_formula_cells(cell):
    assert neutralise(cell) == "'" + cell


def test_neutralise_leaves_plain_cells():
    assert neutralise("alpha") == "alpha" and neutralise("") == "" and neutralise("{\"a\":1}") == '{"a":1}'


def test_csv_export_neutralises_and_parses(mixed):
    audit_append("decision", {}, worker="w", reason="=cmd|' /C calc'!A0")
    text = _export("--format", "csv")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["seq", "time", "kind", "worker", "run", "verdict", "reason", "who", "data", "prev",
                       "hash"]
    assert len(rows) == 6
    assert rows[5][6] == "'=cmd|' /C calc'!A0"
    assert json.loads(rows[4][8]) == {"i": 4, "note": "=HYPERLINK(\"http://evil\")"}
    for row in rows[1:]:
        assert not any(c.startswith(("=", "+", "-", "@", "\t", "\r")) for c in row)


def test_export_to_file_and_standalone_verifier_ok(mixed, tmp_path):
    out = tmp_path / "audit.jsonl"
    call_command("audit", "export", "--format", "jsonl", "--output", str(out))
    proc = _standalone(out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    head = AuditRecord.objects.get(seq=4).hash
    assert proc.stdout.startswith(f"OK: 4 records, head 4:{head}")
    assert _standalone(out, "--anchor", f"4:{head}").returncode == 0
    assert _standalone(out, "--anchor", f"5:{head}").returncode == 1  # cut short
    assert _standalone(out, "--anchor", f"3:{head}").returncode == 1  # different record


def _lines(tmp_path, lines) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(lines))
    return path


@pytest.mark.parametrize("mutation", ["edit", "delete", "insert", "reorder", "rehash"])
def test_standalone_verifier_detects_tampering(mixed, tmp_path, mutation):
    lines = list(jsonl_lines(AuditRecord.objects.all()))
    if mutation == "edit":
        lines[1] = lines[1].replace('\\"deny\\"', '\\"allow\\"')
    elif mutation == "delete":
        del lines[1]
    elif mutation == "insert":
        lines.insert(2, lines[1])
    elif mutation == "reorder":
        lines[1], lines[2] = lines[2], lines[1]
    else:  # edit the body and fix its own hash: the next link breaks
        entry = json.loads(lines[1])
        entry["body"] = entry["body"].replace('"deny"', '"allow"')
        entry["hash"] = chain.record_hash(entry["body"])
        lines[1] = json.dumps(entry) + "\n"
    proc = _standalone(_lines(tmp_path, lines))
    assert proc.returncode == 1 and proc.stdout.startswith("BROKEN: line ")


def test_standalone_verifier_partial_export(mixed, tmp_path):
    lines = list(jsonl_lines(filtered_records(worker="alpha")))
    assert _standalone(_lines(tmp_path, lines)).returncode == 1  # gaps: not a full export
    assert _standalone(_lines(tmp_path, lines), "--partial").returncode == 0
    lines[1] = lines[1].replace('\\"i\\":3', '\\"i\\":9')
    assert _standalone(_lines(tmp_path, lines), "--partial").returncode == 1


def test_standalone_verifier_rejects_empty_and_garbage(tmp_path):
    assert _standalone(_lines(tmp_path, [])).returncode == 1
    assert _standalone(_lines(tmp_path, ["not json\n"])).returncode == 1


def test_export_is_a_lazy_generator():
    assert isinstance(csv_rows(AuditRecord.objects.all()), types.GeneratorType)
    assert isinstance(jsonl_lines(AuditRecord.objects.all()), types.GeneratorType)


def _bulk_chain(count):
    AuditRecord.objects.bulk_create(
        [AuditRecord(seq=s, created_at=t, kind=k, body=b, prev_hash=p, hash=h)
         for s, t, k, b, p, h in chain.generate_chain(count, dt.datetime.now(dt.UTC))], batch_size=2000)


@pytest.mark.parametrize("produce", [csv_rows, jsonl_lines])
def test_export_memory_stays_constant(settings, produce):
    settings.ROSTER_AUDIT_CHUNK_SIZE = 100
    _bulk_chain(10_000)
    tracemalloc.start()
    try:
        total = sum(len(chunk) for chunk in produce(AuditRecord.objects.all()))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total > 1_500_000  # > 1.5 MB of output streamed ...
    assert peak < total / 4, (peak, total)  # ... with a fraction of it held at once


def test_bulk_chain_helper_verifies(settings):
    from controlplane.audit.verify import verify_database

    _bulk_chain(500)
    assert verify_database().checked == 500
    tamper.drop_triggers()
    tamper.raw("DELETE FROM audit_auditrecord WHERE seq = 250")
    assert verify_database().broken_seq == 251


def test_cli_runs_in_a_fresh_process(mixed):
    # manage.py is what auditors run; make sure the command is wired (help lists both actions).
    proc = subprocess.run([sys.executable, "manage.py", "audit", "--help"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and "verify" in proc.stdout and "export" in proc.stdout


@pytest.mark.parametrize(("sql", "params"), [
    ("UPDATE audit_auditrecord SET body = REPLACE(body, '\"deny\"', '\"allow\"') WHERE seq = %s", [2]),
    ("DELETE FROM audit_auditrecord WHERE seq = %s", [2]),
    ("UPDATE audit_auditrecord SET hash = %s WHERE seq = 3", ["f" * 64]),
])
def test_both_verifiers_name_the_same_problem_in_the_same_words(mixed, tmp_path, sql, params):
    # One set of rules (controlplane/audit/chain.py): the database's verify and the auditor's verifier
    # of an export of that database agree on the broken record and on what is wrong with it.
    from controlplane.audit.verify import verify_database

    tamper.drop_triggers()
    tamper.raw(sql, params)
    stored = verify_database()
    out = tmp_path / "audit.jsonl"
    call_command("audit", "export", "--format", "jsonl", "--output", str(out))
    proc = _standalone(out)
    assert not stored.ok and proc.returncode == 1
    stored_problem = stored.message.split("): ", 1)[1]
    exported_problem = proc.stdout.strip().split("): ", 1)[1]
    assert exported_problem == stored_problem, (stored.message, proc.stdout)
    assert f"(seq {stored.broken_seq})" in proc.stdout


def test_an_auditor_needs_only_the_script_and_the_rules_beside_it(mixed, tmp_path):
    out = tmp_path / "audit.jsonl"
    call_command("audit", "export", "--format", "jsonl", "--output", str(out))
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / SCRIPT.name).write_bytes(SCRIPT.read_bytes())
    alone = subprocess.run(["/usr/bin/python3", "-I", "-S", str(kit / SCRIPT.name), str(out)],
                           capture_output=True, text=True, timeout=60)
    assert alone.returncode == 2 and "chain.py" in alone.stderr and not alone.stdout
    (kit / "chain.py").write_bytes((REPO / "controlplane" / "audit" / "chain.py").read_bytes())
    both = subprocess.run(["/usr/bin/python3", "-I", "-S", str(kit / SCRIPT.name), str(out)],
                          capture_output=True, text=True, timeout=60)
    assert both.returncode == 0 and both.stdout.startswith("OK: 4 records"), both.stdout + both.stderr
