"""The pure parts of the append-only, hash-chained audit record: canonical bytes, hashing, time format.
No Django here, so the standalone verifier and the bench can share the exact same rules."""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import json

GENESIS_PREV = "0" * 64  # 32 zero bytes, hex
BODY_KEYS = ("data", "kind", "prev", "reason", "run", "seq", "time", "verdict", "worker")


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
        try:
            raw = body.encode("ascii")
        except UnicodeEncodeError:
            return "stored body is not ASCII (not written by audit_append)"
        actual = hashlib.sha256(raw).hexdigest()
        if actual != stored_hash:
            return f"hash mismatch: stored body hashes to {actual}, record says {stored_hash}"
        try:
            parsed = json.loads(body)
        except ValueError:
            return "stored body is not valid JSON"
        if not isinstance(parsed, dict) or set(parsed) != set(BODY_KEYS):
            return "stored body does not have the audit record fields"
        if parsed["seq"] != seq:
            return f"seq {seq} disagrees with the body's seq {parsed['seq']}"
        if seq != self.expected_seq:
            return f"seq gap: expected seq {self.expected_seq}, found {seq} (a record was removed or added)"
        if parsed["prev"] != self.prev:
            return f"broken link: body prev is {parsed['prev']}, previous record hashes to {self.prev}"
        for name, value in (columns or {}).items():
            if parsed[name] != value:
                return f"column {name!r} is {value!r} but the body says {parsed[name]!r}"
        self.prev = actual
        self.expected_seq += 1
        self.checked += 1
        return None


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
