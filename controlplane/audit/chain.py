"""The pure parts of the append-only, hash-chained audit record: canonical bytes, hashing, time format,
and the rules a stored record must meet, with their messages (re-hash the stored bytes, follow the prev
link, seq contiguity, the indexed columns agree with the body, an anchor from an earlier verify).
Standard library only: the database verifier (controlplane.audit.verify), the standalone export verifier
for auditors (scripts/verify_audit_export.py, which loads this file by its path) and the bench share it."""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import json
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _json_string

GENESIS_PREV = "0" * 64  # 32 zero bytes, hex
BODY_KEYS = ("data", "kind", "prev", "reason", "run", "seq", "time", "verdict", "worker")
_BODY_KEY_SET = frozenset(BODY_KEYS)


def _json_default(value):
    # Only lossless, deterministic conversions; anything else is a bug in the caller.
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dt.datetime):
        return format_time(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"audit data is not JSON-serialisable: {type(value).__name__}")


def canonical_json(obj) -> str:
    """Sorted keys, no whitespace, ASCII only, no NaN: one byte string per value."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False,
                      default=_json_default)


def record_hash(body: str | bytes) -> str:
    raw = body.encode("ascii") if isinstance(body, str) else body
    return hashlib.sha256(raw).hexdigest()


def truncate_ms(moment: dt.datetime) -> dt.datetime:
    moment = moment.astimezone(dt.UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def format_time(moment: dt.datetime) -> str:
    """RFC 3339, millisecond precision, UTC with a Z: 2026-09-17T08:05:00.000Z."""
    m = moment.astimezone(dt.UTC)
    return (f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}."
            f"{m.microsecond // 1000:03d}Z")


def parse_time(text: str) -> dt.datetime:
    if not text.endswith("Z") or len(text) != 24:
        raise ValueError(f"not an RFC 3339 UTC millisecond time: {text!r}")
    return dt.datetime.strptime(text[:-1], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=dt.UTC)


def build_body(*, seq: int, time: dt.datetime, prev: str, kind: str, run: int | None, worker: str,
               verdict: str, reason: str, data: dict) -> str:
    return canonical_json({
        "seq": seq, "time": format_time(time), "prev": prev, "kind": kind, "run": run,
        "worker": worker, "verdict": verdict, "reason": reason, "data": data,
    })


def body_with_data(*, seq: int, time: dt.datetime, prev: str, kind: str, run: int | None, worker: str,
                   verdict: str, reason: str, data_json: str) -> str:
    """build_body's bytes, from `data` already serialised (canonical_json): an appender serialises its
    data once, before the chain head lock, and inside it only fills in seq, time and prev. The fields
    come in canonical_json's sorted key order, each string escaped by the encoder canonical_json uses;
    tests/audit/test_body_template.py holds the two equal."""
    run_text = "null" if run is None else int.__repr__(run)
    return (f'{{"data":{data_json},"kind":{_json_string(kind)},"prev":{_json_string(prev)},'
            f'"reason":{_json_string(reason)},"run":{run_text},"seq":{int.__repr__(seq)},'
            f'"time":"{format_time(time)}","verdict":{_json_string(verdict)},"worker":{_json_string(worker)}}}')


def record_problem(seq: int, body, stored_hash: str) -> tuple[str | None, str, dict | None]:
    """The rules one stored record meets on its own: text of ASCII bytes that hash (SHA-256) to its stored
    hash, a JSON body with exactly the record's fields, whose seq is the record's. Returns (what is wrong
    or None, the bytes' digest or "", the parsed body when sound)."""
    if type(body) is not str:
        return "stored body is not text", "", None
    try:
        raw = body.encode("ascii")
    except UnicodeEncodeError:
        return "stored body is not ASCII (not written by audit_append)", "", None
    actual = hashlib.sha256(raw).hexdigest()
    if actual != stored_hash:
        return f"hash mismatch: stored body hashes to {actual}, record says {stored_hash}", actual, None
    try:
        parsed = json.loads(body)
    except ValueError:
        return "stored body is not valid JSON", actual, None
    if not isinstance(parsed, dict) or parsed.keys() != _BODY_KEY_SET:
        return "stored body does not have the audit record fields", actual, None
    if parsed["seq"] != seq:
        return f"seq {seq} disagrees with the body's seq {parsed['seq']}", actual, None
    return None, actual, parsed


def link_problem(seq: int, body_prev, expected_seq: int, expected_prev: str) -> str | None:
    """The rule between neighbours: a record is the next seq and its body's prev is the hash of the record
    before it (GENESIS_PREV before seq 1)."""
    if seq != expected_seq:
        return f"seq gap: expected seq {expected_seq}, found {seq} (a record was removed or added)"
    if body_prev != expected_prev:
        return f"broken link: body prev is {body_prev}, previous record hashes to {expected_prev}"
    return None


def anchor_problem(seq: int, digest: str, anchor: tuple[int, str] | None) -> str | None:
    """An anchor is a (seq, hash) noted from an earlier verification: the record at that seq must still
    hash to it."""
    if anchor and seq == anchor[0] and digest != anchor[1]:
        return f"anchor mismatch: hash is {digest}, the anchor says {anchor[1]}"
    return None


class ChainChecker:
    """Walks records in seq order and names the first thing wrong. Feed it every record from seq 1
    (or, with start_prev/start_seq, from a known point). Hashes the stored bytes; never re-serialises."""

    def __init__(self, start_seq: int = 1, start_prev: str = GENESIS_PREV):
        self.expected_seq = start_seq
        self.prev = start_prev
        self.checked = 0

    def check(self, seq: int, body: str, stored_hash: str, columns: dict | None = None) -> str | None:
        """Return None if the record is a sound next link, else what is wrong. `columns` are the
        indexed copies (prev, time, kind, run, worker, verdict, reason) to compare with the body."""
        problem, actual, parsed = record_problem(seq, body, stored_hash)
        if problem is None:
            problem = link_problem(seq, parsed["prev"], self.expected_seq, self.prev)
        if problem is not None:
            return problem
        for name, value in (columns or {}).items():
            if parsed[name] != value:
                return f"column {name!r} is {value!r} but the body says {parsed[name]!r}"
        self.prev = actual
        self.expected_seq += 1
        self.checked += 1
        return None


FIELDS = ("id", "seq", "body", "hash", "prev_hash", "created_at", "kind", "run_id_ref", "worker_name",
          "verdict", "reason")


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    checked: int
    message: str
    broken_seq: int | None = None
    head: str = GENESIS_PREV


def row_problem(checker: ChainChecker, row: tuple, anchor: tuple[int, str] | None) -> str | None:
    """The full message for a stored record (a tuple in FIELDS order, as the ORM reads it) that is not the
    sound next link after `checker`'s state, else None. Some rules judge the record after the checker has
    moved past it, so on a problem the checker may already count it."""
    rec_id, seq, body, stored_hash, prev_col, created_at, kind, run, worker, verdict, reason = row
    columns = {"prev": prev_col, "time": format_time(created_at), "kind": kind, "run": run,
               "worker": worker, "verdict": verdict, "reason": reason}
    problem = checker.check(seq, body, stored_hash, columns)
    if problem is None and created_at != truncate_ms(created_at):
        problem = "column 'time' has sub-millisecond digits the body does not"
    if problem is None:
        problem = anchor_problem(seq, stored_hash, anchor)
    return f"record seq {seq} (id {rec_id}): {problem}" if problem else None


def ok_message(count: int, head_seq: int | None, head: str) -> str:
    return f"OK: {count} records, head {head_seq}:{head}"


def finish(checked: int, head: str, anchor: tuple[int, str] | None) -> VerifyResult:
    """The result for a stored chain whose every record passed."""
    if anchor and checked < anchor[0]:
        return VerifyResult(False, checked, f"chain ends at seq {checked} but the anchor names seq "
                            f"{anchor[0]}: records were removed from the end", head=head)
    return VerifyResult(True, checked, ok_message(checked, checked, head), head=head)


def verify_rows(rows, anchor: tuple[int, str] | None = None) -> VerifyResult:
    """The plain sequential walk over stored records: `rows` are tuples in FIELDS order, sorted by seq.
    The chain alone cannot show that its newest records were cut off, but a chain that no longer holds
    the anchor's record with the anchor's hash is broken. The faster walks (verify_scan, verify_parallel)
    defer to `row_problem` for every record they are not sure about, so all of them say the same."""
    checker = ChainChecker()
    for row in rows:
        problem = row_problem(checker, row, anchor)
        if problem:
            return VerifyResult(False, checker.checked, problem, broken_seq=row[1], head=checker.prev)
    return finish(checker.checked, checker.prev, anchor)


def generate_chain(count: int, start: dt.datetime, *, start_seq: int = 1, prev: str = GENESIS_PREV,
                   kinds: tuple[str, ...] = ("decision", "spend")):
    """Yield (seq, time, kind, body, prev, hash) for a valid synthetic chain, fast: for benchmarks and
    tests that need many records without going through audit_append one at a time. The body is
    filled into a template that equals build_body's canonical output for these simple values."""
    start = truncate_ms(start)
    template = ('{"data":{"i":%d},"kind":"%s","prev":"%s","reason":"","run":null,"seq":%d,"time":"%s",'
                '"verdict":"","worker":""}')
    sha256 = hashlib.sha256
    for i in range(count):
        seq = start_seq + i
        moment = start + dt.timedelta(milliseconds=i)
        kind = kinds[i % len(kinds)]
        body = template % (i, kind, prev, seq, format_time(moment))
        digest = sha256(body.encode("ascii")).hexdigest()
        yield seq, moment, kind, body, prev, digest
        prev = digest
