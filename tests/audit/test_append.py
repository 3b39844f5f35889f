"""audit_append: canonical body, hash over stored bytes, chaining from 32 zero bytes."""

import datetime as dt
import enum
import hashlib
import json

import pytest
from django.db import transaction

from controlplane.audit import chain
from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append
from controlplane.fleet.models import Run, Worker

pytestmark = pytest.mark.django_db


def test_first_record_chains_from_zero_and_hash_is_over_stored_bytes():
    rec = audit_append("decision", {"host": "api.example.com", "n": 1}, verdict="allow")
    assert rec.seq == 1
    assert rec.prev_hash == "0" * 64
    assert rec.hash == hashlib.sha256(rec.body.encode("ascii")).hexdigest()
    body = json.loads(rec.body)
    assert set(body) == set(chain.BODY_KEYS)
    assert body["prev"] == "0" * 64 and body["seq"] == 1 and body["verdict"] == "allow"
    # Canonical: sorted keys, compact separators.
    assert rec.body == json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def test_records_link_to_previous_hash_and_seq_is_contiguous():
    recs = [audit_append("decision", {"i": i}) for i in range(5)]
    for before, after in zip(recs, recs[1:], strict=False):
        assert after.prev_hash == before.hash
        assert after.seq == before.seq + 1
        assert json.loads(after.body)["prev"] == before.hash


def test_time_is_rfc3339_ms_utc_and_matches_column():
    rec = audit_append("run_state", {"status": "running"})
    text = json.loads(rec.body)["time"]
    assert len(text) == 24 and text.endswith("Z") and text[19] == "."
    assert chain.parse_time(text) == rec.created_at


def test_non_ascii_is_escaped_so_body_is_ascii():
    rec = audit_append("decision", {"msg": "héllo ☃"})
    rec.body.encode("ascii")
    assert "\\u2603" in rec.body
    assert json.loads(rec.body)["data"]["msg"] == "héllo ☃"


def test_run_and_worker_are_recorded_in_body_and_columns():
    worker = Worker.objects.create(name="w1")
    run = Run.objects.create(worker=worker)
    rec = audit_append("decision", {}, run=run, verdict="deny", reason="no_grant")
    body = json.loads(rec.body)
    assert body["run"] == run.pk and body["worker"] == "w1"
    assert rec.run_id_ref == run.pk and rec.worker_name == "w1"
    assert rec.verdict == "deny" and rec.reason == "no_grant"
    rec2 = audit_append("decision", {}, run=run.pk, worker="w1")
    assert json.loads(rec2.body)["run"] == run.pk


def test_enums_are_stored_as_their_values():
    class V(str, enum.Enum):  # noqa: UP042 - the mixin whose str() is not its value
        ALLOW = "allow"

    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rec = audit_append("decision", {"v": V.ALLOW, "at": at}, verdict=V.ALLOW)
    body = json.loads(rec.body)
    assert body["verdict"] == "allow" and body["data"] == {"v": "allow", "at": "2026-01-01T00:00:00.000Z"}


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"kind": "nonsense", "data": {}}, ValueError),
        ({"kind": "decision", "data": ["not", "a", "dict"]}, TypeError),
        ({"kind": "decision", "data": {"x": object()}}, TypeError),
        ({"kind": "decision", "data": {"x": float("nan")}}, ValueError),
        ({"kind": "decision", "data": {}, "verdict": "x" * 17}, ValueError),
        ({"kind": "decision", "data": {}, "worker": "w" * 65}, ValueError),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(kwargs, error):
    kind, data = kwargs.pop("kind"), kwargs.pop("data")
    with pytest.raises(error):
        audit_append(kind, data, **kwargs)
    assert AuditRecord.objects.count() == 0


def test_record_rolls_back_with_the_change_it_records():
    audit_append("decision", {"kept": True})
    with pytest.raises(RuntimeError), transaction.atomic():
        audit_append("decision", {"kept": False})
        raise RuntimeError("the change failed")
    rec = audit_append("decision", {"after": True})
    assert AuditRecord.objects.count() == 2
    assert rec.seq == 2


def test_synthetic_chain_template_is_canonical():
    start = dt.datetime(2026, 3, 4, 5, 6, 7, 891234, tzinfo=dt.UTC)
    rows = list(chain.generate_chain(3, start, start_seq=7, prev="a" * 64))
    for i, (seq, moment, kind, body, prev, digest) in enumerate(rows):
        assert body == chain.build_body(seq=seq, time=moment, prev=prev, kind=kind, run=None, worker="",
                                        verdict="", reason="", data={"i": i})
        assert digest == chain.record_hash(body)
    assert rows[0][4] == "a" * 64 and rows[1][4] == rows[0][5]


def test_sqlite_without_immediate_transactions_is_refused(monkeypatch):
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("SQLite setting")
    monkeypatch.setitem(connection.settings_dict, "OPTIONS", {})
    with pytest.raises(RuntimeError, match="IMMEDIATE"):
        audit_append("decision", {})
