"""The pure parts of the audit chain (seed 002 §6): canonical bytes, hashing, time format.
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
    moment = truncate_ms(moment)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


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
