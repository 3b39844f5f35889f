"""The verifier's inner loop over one seq range of the stored chain, streamed with a plain cursor.

Speed without a second set of rules: each row first goes through a fast check (raw columns, no ORM
objects or datetime conversion, one dict comparison). That check only ever says "this row is a sound
next link" when `chain.row_problem` (the rules and their messages) would say so too; any row
it is not sure about is fetched again through the ORM and judged by `row_problem` itself. So the first
bad seq, the message and the count are the ones the plain sequential walk gives."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction

from controlplane.audit import chain
from controlplane.audit.chain import FIELDS, VerifyResult, row_problem
from controlplane.audit.models import AuditRecord

_BODY_KEYS = frozenset(chain.BODY_KEYS)
_ZERO = dt.timedelta(0)
# The C scanner behind json.loads: a body it parses to its very end is what json.loads returns for it
# (an ASCII body has no BOM); anything else goes to the slow path, which calls json.loads itself.
_scan_json = json.JSONDecoder().scan_once


@dataclass(frozen=True)
class Span:
    """What verifying one seq range found. `start_*` is the chain state the scan began from (for a scan
    seeded from its own first record: that record's seq and stored prev_hash), `end_*` the state after
    its last good record. `problem` is the full message for the first bad record, else None."""

    start_seq: int | None
    start_prev: str | None
    checked: int
    end_seq: int | None
    end_prev: str | None
    problem: str | None = None
    broken_seq: int | None = None
    stopped: bool = False  # gave up early because another range already failed

    def failure(self, checked_before: int) -> VerifyResult | None:
        """The verify result if this span, scanned from the true chain state, found a problem."""
        if self.problem is None:
            return None
        return VerifyResult(False, checked_before + self.checked, self.problem, broken_seq=self.broken_seq,
                            head=self.end_prev)


def _sqlite_time_matches(raw, text) -> bool:
    """True only if `text` (the body's time) is format_time() of the value Django makes of `raw` (the
    stored SQLite text) and that value has no sub-millisecond digits; False when unsure."""
    if type(raw) is not str or type(text) is not str or len(text) != 24 or text[10] != "T" or text[23] != "Z":
        return False
    if raw != f"{text[:10]} {text[11:23]}000" and (
            text[19:23] != ".000" or raw != f"{text[:10]} {text[11:19]}"):  # str() drops a zero fraction
        return False
    try:  # the same layout with ASCII digits in range, parsed as Django's converter parses it
        dt.datetime.fromisoformat(raw)
    except ValueError:
        return False
    return True


# PostgreSQL hands the time over as text in UTC with every microsecond digit and the era (its driver's
# datetime loader is written in Python and cost a third of the scan), so the comparison is of text too.
# Only for the column the migrations made (timestamptz: another type would be read differently by the
# rules), and with the functions named in pg_catalog, which no search_path can put another one before.
_PG_TIME_TEXT = ("pg_catalog.to_char(pg_catalog.timezone('UTC', {column}), "
                 "'YYYY-MM-DD\"T\"HH24:MI:SS.US BC')")
# The column's type oid, compared here (timestamptz's oid is fixed): in SQL even `=` is looked up by name,
# and an operator made for exactly (oid, regtype) would win over pg_catalog's.
_PG_TIMESTAMPTZ_OID = 1184
_PG_TIME_COLUMN_TYPE = ("SELECT a.atttypid FROM pg_catalog.pg_attribute a "
                        "WHERE a.attrelid OPERATOR(pg_catalog.=) %s::pg_catalog.regclass "
                        "AND a.attname OPERATOR(pg_catalog.=) 'created_at'::pg_catalog.name "
                        "AND NOT a.attisdropped")


def _pg_time_matches(raw, text) -> bool:
    """True only if `raw` (_PG_TIME_TEXT of the column) is the body's time exactly: the same UTC moment,
    no sub-millisecond digits, a year of four digits in our era; False when unsure."""
    return (type(raw) is str and type(text) is str and len(text) == 24 and text[23] == "Z"
            and raw == f"{text[:23]}000 AD")


def _never(raw, text) -> bool:
    return False


def _pg_time_column_is_timestamptz() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(_PG_TIME_COLUMN_TYPE, [connection.ops.quote_name(AuditRecord._meta.db_table)])
        rows = cursor.fetchall()
    return len(rows) == 1 and type(rows[0][0]) is int and rows[0][0] == _PG_TIMESTAMPTZ_OID


def _time_matcher():
    """How the fast path compares the time column with the body's time, and whether the scan reads that
    column as PostgreSQL's UTC text."""
    if connection.vendor == "sqlite":
        # Django makes stored naive values aware in the connection's zone; the fast path assumes UTC.
        utc = settings.USE_TZ and connection.timezone.utcoffset(dt.datetime(2000, 1, 1)) == _ZERO
        return (_sqlite_time_matches if utc else _never), False
    if connection.vendor == "postgresql" and _pg_time_column_is_timestamptz():
        return _pg_time_matches, True
    return _never, False


def _cursor_rows(cursor, lo: int | None, hi: int | None, pg_time_text: bool):
    table = connection.ops.quote_name(AuditRecord._meta.db_table)
    columns = [connection.ops.quote_name(name) for name in FIELDS]
    time_at = FIELDS.index("created_at")
    if connection.vendor == "sqlite":
        # Without a declared type the driver hands over the stored text instead of parsing it.
        columns[time_at] = f"CAST({columns[time_at]} AS TEXT)"
    elif pg_time_text:
        columns[time_at] = _PG_TIME_TEXT.format(column=columns[time_at])
    columns = ", ".join(columns)
    where, params = [], []
    if lo is not None:
        where.append("seq >= %s")
        params.append(lo)
    if hi is not None:
        where.append("seq < %s")
        params.append(hi)
    sql = f"SELECT {columns} FROM {table}" + (" WHERE " + " AND ".join(where) if where else "")
    cursor.execute(sql + " ORDER BY seq", params)
    return cursor


def _orm_row(rec_id):
    return AuditRecord.objects.filter(id=rec_id).values_list(*FIELDS).get()


def scan_range(lo: int | None, hi: int | None, start: tuple[int, str] | None,
               anchor: tuple[int, str] | None = None, stop=None) -> Span:
    """Verify records with lo <= seq < hi (None: unbounded) in seq order. `start` is the (expected seq,
    prev hash) the chain has before this range; None seeds it from the range's first record. `stop` (a
    callable) ends the scan early, between fetches, once an earlier range is known to be broken."""
    if connection.vendor == "postgresql":
        # In a transaction PostgreSQL's server-side cursor streams; in autocommit it is WITH HOLD and
        # the whole result is materialised first. A read locks nothing. (Never on SQLite: there every
        # transaction takes the write lock up front, which would hold up every decision.)
        with transaction.atomic():
            return _scan(lo, hi, start, anchor, stop)
    return _scan(lo, hi, start, anchor, stop)


def _scan(lo, hi, start, anchor, stop) -> Span:
    time_matches, pg_time_text = _time_matcher()
    sha256, scan_json = hashlib.sha256, _scan_json
    anchor_seq, anchor_hash = anchor if anchor else (None, None)
    fetch = settings.ROSTER_AUDIT_CHUNK_SIZE
    if fetch < 1:  # fetchmany(0) returns nothing: the chain would look empty, and sound
        raise ValueError("ROSTER_AUDIT_CHUNK_SIZE must be at least 1")
    expected, prev = start if start else (None, None)
    first = start
    checked = 0
    # A server-side cursor on PostgreSQL (a plain one would load the whole result), SQLite streams anyway.
    with connection.chunked_cursor() as cursor:
        rows = _cursor_rows(cursor, lo, hi, pg_time_text)
        while batch := rows.fetchmany(fetch):
            if stop is not None and stop():
                return Span(*(first or (None, None)), checked, expected, prev, stopped=True)
            for row in batch:
                rec_id, seq, body, stored_hash, prev_col, created, kind, run, worker, verdict, reason = row
                if first is None:
                    expected, prev = first = (seq, prev_col)
                sound = False
                if type(body) is str and body.isascii():
                    digest = sha256(body.encode("ascii")).hexdigest()
                    if digest == stored_hash and seq == expected and prev_col == prev:
                        try:
                            parsed, end = scan_json(body, 0)
                        except (StopIteration, ValueError, RecursionError):
                            parsed, end = None, -1
                        sound = (end == len(body) and type(parsed) is dict and parsed.keys() == _BODY_KEYS
                                 and parsed["seq"] == seq and parsed["prev"] == prev
                                 and parsed["kind"] == kind and parsed["run"] == run
                                 and parsed["worker"] == worker and parsed["verdict"] == verdict
                                 and parsed["reason"] == reason and time_matches(created, parsed["time"])
                                 and (seq != anchor_seq or stored_hash == anchor_hash))
                if not sound:
                    checker = chain.ChainChecker(start_seq=expected, start_prev=prev)
                    problem = row_problem(checker, _orm_row(rec_id), anchor)
                    if problem is not None:
                        # Some rules judge a record after the chain checker has moved past it; the
                        # count and head say what the checker says.
                        return Span(*first, checked + checker.checked, checker.expected_seq, checker.prev,
                                    problem, broken_seq=seq)
                    digest = checker.prev
                prev = digest
                expected += 1
                checked += 1
    return Span(*(first or (None, None)), checked, expected, prev)
