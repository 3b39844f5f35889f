"""Streaming audit export for auditors (CLI and the web's CSV download). Records are read in chunks,
so a million records never sit in memory. CSV cells that a spreadsheet would run as a formula are
neutralised; JSONL carries each record's exact stored body and its hash for offline verification."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Iterable, Iterator

from django.conf import settings
from django.db.models import QuerySet

from controlplane.audit.models import AuditRecord

# "who" is the audit page's Who column (the person behind a record): the download answers what the page did.
CSV_HEADER = ["seq", "time", "kind", "worker", "run", "verdict", "reason", "who", "data", "prev", "hash"]
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def filtered_records(*, since: dt.datetime | None = None, until: dt.datetime | None = None,
                     worker: str | None = None, run: int | None = None, kind: str | None = None,
                     verdict: str | None = None, seq: int | None = None) -> QuerySet[AuditRecord]:
    qs = AuditRecord.objects.order_by("seq")
    if seq is not None:  # one record, as the answer sheet links each fact to it
        qs = qs.filter(seq=seq)
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    if until is not None:
        qs = qs.filter(created_at__lte=until)
    if worker:
        qs = qs.filter(worker_name=worker)
    if run is not None:
        qs = qs.filter(run_id_ref=run)
    if kind:
        qs = qs.filter(kind=kind)
    if verdict:
        qs = qs.filter(verdict=verdict)
    return qs


def record_who(data: object) -> str:
    """The person a record names as behind it: an approver's or an admin's `by`, or `approved_by`; ""
    for none (a box's decision)."""
    if not isinstance(data, dict):
        return ""
    return str(data.get("by") or data.get("approved_by") or "")


def neutralise(cell: str) -> str:
    """A leading ' makes spreadsheets show the cell as text instead of evaluating it."""
    return "'" + cell if cell.startswith(_FORMULA_STARTS) else cell


def _stream(records: QuerySet[AuditRecord]) -> Iterable[tuple]:
    return records.order_by("seq").values_list("seq", "body", "hash").iterator(
        chunk_size=settings.ROSTER_AUDIT_CHUNK_SIZE)


def csv_rows(records: QuerySet[AuditRecord]) -> Iterator[str]:
    """CSV text, one chunk per record (header first). Fields come from the stored body."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")

    def flush(row) -> str:
        writer.writerow([neutralise(str(c)) for c in row])
        text = buf.getvalue()
        buf.seek(0)
        buf.truncate()
        return text

    yield flush(CSV_HEADER)
    for seq, body, record_hash in _stream(records):
        b = json.loads(body)
        data = json.dumps(b["data"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        yield flush([seq, b["time"], b["kind"], b["worker"], "" if b["run"] is None else b["run"],
                     b["verdict"], b["reason"], record_who(b["data"]), data, b["prev"], record_hash])


def jsonl_lines(records: QuerySet[AuditRecord]) -> Iterator[str]:
    """One JSON object per line: seq, the exact stored body (a string) and its hash."""
    for seq, body, record_hash in _stream(records):
        yield json.dumps({"seq": seq, "body": body, "hash": record_hash}, separators=(",", ":")) + "\n"
