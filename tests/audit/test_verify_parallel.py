"""Verifying in worker processes gives exactly the sequential verifier's result: the same first bad
seq, message, count and head, for tampering in the first range, a middle one, the last one and at
a seam between two ranges. Runs on PostgreSQL too (tests/integration/test_on_postgresql.py).

Transactional tests: the workers have their own connections and see only committed rows."""

import contextlib
import datetime as dt
import json

import pytest

from controlplane.audit import chain, verify_parallel, verify_worker
from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append
from controlplane.audit.verify import FIELDS, verify_database, verify_rows, verify_sequential
from tests.audit import tamper

pytestmark = pytest.mark.django_db(transaction=True)

RECORDS = 40
RANGE = 5  # with two workers: eight ranges, [1, 6), [6, 11), ... [36, 41)
# First record, inside the first range, a middle range, the last record of one range and the first
# of the next (the seam), the last record of the chain.
POSITIONS = [1, 3, 13, 20, 21, 40]


@pytest.fixture
def chain40(settings):
    settings.ROSTER_AUDIT_CHUNK_SIZE = RANGE
    settings.ROSTER_AUDIT_VERIFY_PARALLEL_MIN_RECORDS = 10
    for i in range(RECORDS):
        audit_append("decision" if i % 3 else "spend", {"i": i, "host": f"h{i}.example"},
                     worker=f"w{i % 4}", verdict=("allow", "deny")[i % 2], reason="" if i % 2 else "no_grant")
    tamper.drop_triggers()
    pristine = list(AuditRecord.objects.all())
    yield lambda: _restore(pristine)
    tamper.restore_triggers()


def _restore(pristine):
    """The untouched chain again (cheaper than a new transactional test per case)."""
    tamper.raw("DELETE FROM audit_auditrecord")
    AuditRecord.objects.bulk_create(pristine)


def _reference(anchor=None):
    """The plain sequential walk over ORM rows: the rules with no fast path and no ranges."""
    rows = AuditRecord.objects.order_by("seq").values_list(*FIELDS).iterator(chunk_size=RANGE)
    return verify_rows(rows, anchor)


def _all_agree(anchor=None, case=None):
    expected = _reference(anchor)
    assert len(verify_parallel.plan(2).ranges) == 8
    assert verify_database(anchor, workers=2) == expected, case
    assert verify_sequential(anchor) == expected, case
    assert verify_database(anchor, workers=1) == expected, case
    return expected


def _edit_body(seq):
    tamper.raw("UPDATE audit_auditrecord SET body = REPLACE(body, '\"h', '\"x') WHERE seq = %s", [seq])


def _edit_hash(seq):
    tamper.raw("UPDATE audit_auditrecord SET hash = %s WHERE seq = %s", ["e" * 64, seq])


def _delete(seq):
    tamper.raw("DELETE FROM audit_auditrecord WHERE seq = %s", [seq])


def _swap(seq):
    a, b = (seq, seq + 1) if seq < RECORDS else (seq - 1, seq)
    tamper.raw("UPDATE audit_auditrecord SET seq = -1 WHERE seq = %s", [a])
    tamper.raw("UPDATE audit_auditrecord SET seq = %s WHERE seq = %s", [a, b])
    tamper.raw("UPDATE audit_auditrecord SET seq = %s WHERE seq = -1", [b])


def _fork(seq):
    """Rewrite the record (hash recomputed, columns matching) to name its predecessor's predecessor."""
    rec = AuditRecord.objects.get(seq=seq)
    prev = AuditRecord.objects.get(seq=seq - 1).prev_hash if seq > 1 else "1" * 64
    body = json.loads(rec.body)
    body["prev"] = prev
    text = chain.canonical_json(body)
    tamper.raw("UPDATE audit_auditrecord SET body = %s, hash = %s, prev_hash = %s WHERE seq = %s",
               [text, chain.record_hash(text), prev, seq])


TAMPERS = {"body": _edit_body, "hash": _edit_hash, "delete": _delete, "swap": _swap, "fork": _fork}


def test_sound_chain_verifies_ok_in_parallel(chain40):
    result = _all_agree()
    assert result.ok and result.checked == RECORDS
    assert result.head == AuditRecord.objects.get(seq=RECORDS).hash


def _ranges_verified_here(monkeypatch) -> list:
    """The ranges this process had to verify itself (a worker failed, found a problem or mis-seamed)."""
    here = []
    real = verify_parallel.scan_range
    monkeypatch.setattr(verify_parallel, "scan_range",
                        lambda lo, hi, *rest: here.append((lo, hi)) or real(lo, hi, *rest))
    return here


def test_the_workers_do_the_work_and_read_this_database(chain40, monkeypatch):
    # A worker that could not reach the database would be covered for by this process, silently slower:
    # a sound chain is verified by the workers alone, from the very database this process reads.
    here = _ranges_verified_here(monkeypatch)
    assert verify_database(workers=2).ok and here == []
    _edit_body(13)
    assert verify_database(workers=2).broken_seq == 13 and here == [(11, 16)]


@pytest.mark.parametrize("kind", sorted(TAMPERS))
def test_tampering_gives_the_sequential_result(chain40, kind):
    for position in POSITIONS:
        chain40()
        TAMPERS[kind](position)
        result = _all_agree(case=(kind, position))
        if kind == "delete" and position == RECORDS:
            assert result.ok and result.checked == RECORDS - 1  # a clean cut needs the anchor (below)
        else:
            assert not result.ok, (kind, position)
            assert result.broken_seq in (position - 1, position, position + 1), (kind, position)


def test_the_earliest_of_two_broken_ranges_wins(chain40):
    _edit_body(33)
    _edit_hash(8)
    assert _all_agree().broken_seq == 8


def test_indexed_column_edited_at_a_seam(chain40):
    tamper.raw("UPDATE audit_auditrecord SET worker_name = 'evil' WHERE seq = 26")
    result = _all_agree()
    assert result.broken_seq == 26 and "column 'worker'" in result.message


def _rewrite(seq, **changes):
    """Change body fields of one record and re-hash it and every later link: a sound chain again."""
    prev = None
    for rec in AuditRecord.objects.filter(seq__gte=seq).order_by("seq"):
        body = json.loads(rec.body)
        body.update(changes if rec.seq == seq else {})
        body["prev"] = prev or body["prev"]
        text = chain.canonical_json(body)
        prev = chain.record_hash(text)
        AuditRecord.objects.filter(seq=rec.seq).update(body=text, hash=prev, prev_hash=body["prev"])


def test_a_whole_second_time_is_sound(chain40):
    # Stored without a fraction on SQLite: the fast path reads that form too, or asks the rules.
    for seq in (1, 16, 40):
        whole = AuditRecord.objects.get(seq=seq).created_at.replace(microsecond=0)
        AuditRecord.objects.filter(seq=seq).update(created_at=whole)
        _rewrite(seq, time=chain.format_time(whole))
    result = _all_agree()
    assert result.ok and result.checked == RECORDS


@pytest.mark.parametrize("seq", [6, 30])
def test_sub_millisecond_digits_in_the_time_column(chain40, seq):
    # The record itself is sound: the rules judge the column after the chain checker has moved past
    # it, so the count and head include it. The parallel result must say the same.
    moment = AuditRecord.objects.get(seq=seq).created_at
    AuditRecord.objects.filter(seq=seq).update(created_at=moment.replace(microsecond=moment.microsecond + 7))
    result = _all_agree()
    assert result.broken_seq == seq and "sub-millisecond" in result.message and result.checked == seq


@pytest.mark.parametrize("shift", [dt.timedelta(hours=1), dt.timedelta(milliseconds=1),
                                   dt.timedelta(days=-365 * 1500)])
def test_a_time_column_moved_away_from_the_body_is_caught(chain40, shift):
    # The fast path compares the column's text with the body's time; any other moment, however close
    # or far, is judged by the rules and named.
    seq = 17
    moment = AuditRecord.objects.get(seq=seq).created_at
    AuditRecord.objects.filter(seq=seq).update(created_at=moment + shift)
    result = _all_agree()
    assert result.broken_seq == seq and "column 'time'" in result.message


@contextlib.contextmanager
def _time_column_naive():
    """The time column retyped to a naive timestamp (the same UTC wall time), put back afterwards."""
    tamper.raw("ALTER TABLE audit_auditrecord ALTER COLUMN created_at TYPE timestamp "
               "USING created_at AT TIME ZONE 'UTC'")
    try:
        yield
    finally:
        tamper.raw("ALTER TABLE audit_auditrecord ALTER COLUMN created_at TYPE timestamptz "
                   "USING created_at AT TIME ZONE 'UTC'")


def test_postgresql_a_time_column_of_another_type_is_judged_by_the_rules(chain40):
    # The fast path reads timestamptz as UTC text; a column retyped to a naive timestamp would read the
    # same text, but the rules judge it otherwise, and so must the verifier.
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("SQLite keeps no column types to change")
    with _time_column_naive():
        result = _all_agree()
    assert not result.ok and result.broken_seq == 1 and "column 'time'" in result.message
    assert _all_agree().ok


def test_postgresql_an_operator_made_to_say_the_type_is_right_is_not_asked(chain40):
    # An `=` made for exactly (oid, regtype) or (oid, regclass) would win over pg_catalog's in a query
    # that writes a plain `=`; the type check compares the type's oid itself.
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no user-made operators")
    for right in ("regtype", "regclass", "name"):
        tamper.raw(f"CREATE FUNCTION public.always_{right}(oid, {right}) RETURNS boolean LANGUAGE sql "
                   "AS 'SELECT true'")
        tamper.raw(f"CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = {right}, "
                   f"FUNCTION = public.always_{right})")
    try:
        with _time_column_naive():
            result = _all_agree()
    finally:
        for right in ("regtype", "regclass", "name"):
            tamper.raw(f"DROP OPERATOR public.= (oid, {right})")
            tamper.raw(f"DROP FUNCTION public.always_{right}(oid, {right})")
    assert not result.ok and result.broken_seq == 1 and "column 'time'" in result.message


def test_postgresql_functions_earlier_on_the_search_path_are_not_called(chain40):
    # A to_char that adds an hour, found before pg_catalog's, would make a record moved back an hour
    # read as sound; the fast path names pg_catalog's own.
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no schemas or search path")
    tamper.raw("CREATE SCHEMA shadow")
    try:
        for argument in ("timestamp", "timestamptz"):
            tamper.raw(f"CREATE FUNCTION shadow.to_char({argument}, text) RETURNS text LANGUAGE sql "
                       "AS $$ SELECT pg_catalog.to_char($1 + interval '1 hour', $2) $$")
        moment = AuditRecord.objects.get(seq=7).created_at
        AuditRecord.objects.filter(seq=7).update(created_at=moment - dt.timedelta(hours=1))
        tamper.raw("SET search_path = shadow, pg_catalog, public")
        result, expected = verify_sequential(), _reference()
    finally:
        tamper.raw("RESET search_path")
        tamper.raw("DROP SCHEMA shadow CASCADE")
    assert result == expected and expected.broken_seq == 7 and "column 'time'" in expected.message


def test_anchor_at_a_seam_and_past_the_end(chain40):
    head = AuditRecord.objects.get(seq=RECORDS)
    assert _all_agree((RECORDS, head.hash)).ok
    result = _all_agree((21, "0" * 64))
    assert result.broken_seq == 21 and "anchor mismatch" in result.message
    _delete(RECORDS)
    assert "removed from the end" in _all_agree((RECORDS, head.hash)).message


def test_a_crashed_worker_range_is_verified_in_this_process(chain40, monkeypatch):
    from tests.audit import verify_faults

    monkeypatch.setattr(verify_worker, "scan_task", verify_faults.crash_on_third_range)
    here = _ranges_verified_here(monkeypatch)
    assert _all_agree().ok and here == [(11, 16)]  # the third range, [11, 16), and no other
    _edit_body(12)  # inside the crashed worker's range
    assert _all_agree().broken_seq == 12


def test_short_chains_one_worker_and_open_transactions_verify_in_process(chain40, settings):
    from django.db import transaction

    assert verify_parallel.plan(1) is None
    settings.ROSTER_AUDIT_VERIFY_PARALLEL_MIN_RECORDS = RECORDS + 1
    assert verify_parallel.plan(2) is None
    settings.ROSTER_AUDIT_VERIFY_PARALLEL_MIN_RECORDS = 10
    with transaction.atomic():
        assert verify_parallel.plan(2) is None  # workers could not see this transaction's rows


def test_sound_records_never_take_the_slow_path(chain40, monkeypatch):
    # The speed of verify rests on the fast check accepting sound records on this database's driver.
    from controlplane.audit import verify_scan

    slow = []
    real = verify_scan._orm_row
    monkeypatch.setattr(verify_scan, "_orm_row", lambda rec_id: slow.append(rec_id) or real(rec_id))
    assert verify_sequential().ok and slow == []
    _edit_body(9)
    assert verify_sequential().broken_seq == 9 and slow == [AuditRecord.objects.get(seq=9).id]


def test_the_command_and_the_default_use_the_workers(chain40, capsys, monkeypatch, settings):
    from django.core.management import call_command

    used = []
    real = verify_parallel.verify_in_parallel
    monkeypatch.setattr(verify_parallel, "verify_in_parallel",
                        lambda *args: used.append(args[0].workers) or real(*args))
    call_command("audit", "verify", "--workers", "2")
    assert capsys.readouterr().out.splitlines()[0] == _reference().message and used == [2]
    settings.ROSTER_AUDIT_VERIFY_WORKERS = 3
    _edit_body(27)
    assert verify_database() == _reference() and used == [2, 3]


@pytest.mark.django_db
def test_verify_memory_stays_constant(settings):
    # Rows are streamed (a server-side cursor on PostgreSQL): a 10,000-record chain, of which only a
    # fetch of 100 rows is held at once.
    import datetime as dt
    import tracemalloc

    settings.ROSTER_AUDIT_CHUNK_SIZE = 100
    AuditRecord.objects.bulk_create(
        [AuditRecord(seq=s, created_at=t, kind=k, body=b, prev_hash=p, hash=h)
         for s, t, k, b, p, h in chain.generate_chain(10_000, dt.datetime.now(dt.UTC))], batch_size=2000)
    stored = sum(len(b) for b in AuditRecord.objects.values_list("body", flat=True).iterator())
    tracemalloc.start()
    try:
        result = verify_sequential()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.ok and result.checked == 10_000
    assert peak < stored / 10, (peak, stored)


@pytest.mark.django_db
def test_postgresql_rows_stay_on_the_server(chain40, monkeypatch):
    # libpq's memory is not Python's: ask the server whether the scan holds an open cursor while a
    # doubtful row (in the middle of the chain) is looked at.
    from django.db import connection

    from controlplane.audit import verify_scan

    if connection.vendor != "postgresql":
        pytest.skip("SQLite steps through its rows anyway")
    open_cursors = []
    real = verify_scan._orm_row

    def spy(rec_id):
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_cursors")
            open_cursors.append(cursor.fetchone()[0])
        return real(rec_id)

    monkeypatch.setattr(verify_scan, "_orm_row", spy)
    _edit_body(20)
    assert verify_sequential().broken_seq == 20 and open_cursors == [1]


def test_a_seq_that_is_not_a_number_is_judged_like_the_single_pass(chain40):
    from django.db import connection

    if connection.vendor == "postgresql":
        tamper.raw("ALTER TABLE audit_auditrecord ALTER COLUMN seq DROP NOT NULL")
        tamper.raw("UPDATE audit_auditrecord SET seq = NULL WHERE seq = 20")
    else:  # SQLite keeps text in an integer column, and NULL only through a rebuilt table
        tamper.raw("UPDATE audit_auditrecord SET seq = 'x' WHERE seq = 40")
    assert verify_parallel.plan(2) is None
    expected = _reference()
    assert not expected.ok and verify_database(workers=2) == expected
    if connection.vendor == "postgresql":
        tamper.raw("DELETE FROM audit_auditrecord WHERE seq IS NULL")
        tamper.raw("ALTER TABLE audit_auditrecord ALTER COLUMN seq SET NOT NULL")
