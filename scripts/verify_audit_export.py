#!/usr/bin/env python3
"""Check a Roster audit export (JSONL from `manage.py audit export --format jsonl`) with nothing but
the Python standard library: every line's stored body must hash (SHA-256 over its exact bytes) to
its hash, and each body's prev must be the previous record's hash, from 32 zero bytes at seq 1.

    python3 verify_audit_export.py audit.jsonl            # a full export: seq 1, 2, 3, ... no gaps
    python3 verify_audit_export.py --partial audit.jsonl  # a filtered export: links checked where seqs touch
    python3 verify_audit_export.py --anchor 1000:<hash> audit.jsonl  # must still hold that record

Prints OK with the count and the head as SEQ:HASH, or the first broken line and what is wrong;
exits 1 if broken."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

GENESIS_PREV = "0" * 64
BODY_KEYS = {"data", "kind", "prev", "reason", "run", "seq", "time", "verdict", "worker"}


Result = tuple[str | None, int, str]


def check_line(line: str, prev_seq: int | None, prev_hash: str | None, partial: bool) -> Result:
    """Return (problem or None, seq, hash) for one export line."""
    try:
        entry = json.loads(line)
        seq, body, stored_hash = entry["seq"], entry["body"], entry["hash"]
    except (ValueError, KeyError, TypeError):
        return "not an export line with seq, body and hash", -1, ""
    if not isinstance(body, str) or not isinstance(seq, int):
        return "body must be a string and seq an integer", -1, ""
    try:
        actual = hashlib.sha256(body.encode("ascii")).hexdigest()
    except UnicodeEncodeError:
        return "stored body is not ASCII", seq, ""
    if actual != stored_hash:
        return f"hash mismatch: body hashes to {actual}, line says {stored_hash}", seq, actual
    try:
        parsed = json.loads(body)
    except ValueError:
        return "body is not valid JSON", seq, actual
    if not isinstance(parsed, dict) or set(parsed) != BODY_KEYS:
        return "body does not have the audit record fields", seq, actual
    if parsed["seq"] != seq:
        return f"line seq {seq} disagrees with body seq {parsed['seq']}", seq, actual
    if partial and prev_seq is None:
        return None, seq, actual  # a filtered export may start anywhere
    expected_seq = 1 if prev_seq is None else prev_seq + 1
    if seq != expected_seq:
        if not partial or seq < expected_seq:
            return f"seq gap: expected {expected_seq}, found {seq}", seq, actual
        return None, seq, actual  # a filtered export skips records; nothing to link to
    expected_prev = GENESIS_PREV if prev_hash is None else prev_hash
    if parsed["prev"] != expected_prev:
        return (f"broken link: prev is {parsed['prev']}, previous record hashes to {expected_prev}",
                seq, actual)
    return None, seq, actual


def verify(lines, partial: bool = False, anchor: tuple[int, str] | None = None) -> tuple[bool, str]:
    prev_seq: int | None = None
    prev_hash: str | None = None
    count = 0
    anchor_seen = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        problem, seq, digest = check_line(line, prev_seq, prev_hash, partial)
        if problem is None and anchor and seq == anchor[0]:
            anchor_seen = True
            if digest != anchor[1]:
                problem = f"anchor mismatch: hash is {digest}, the anchor says {anchor[1]}"
        if problem:
            return False, f"line {number} (seq {seq}): {problem}"
        prev_seq, prev_hash, count = seq, digest, count + 1
    if count == 0:
        return False, "no records in the export"
    if anchor and not anchor_seen:
        return False, f"the export has no record seq {anchor[0]} named by the anchor"
    return True, f"OK: {count} records, head {prev_seq}:{prev_hash}"


def _anchor(text: str) -> tuple[int, str]:
    seq, _, digest = text.partition(":")
    if not seq.isdigit() or len(digest) != 64:
        raise argparse.ArgumentTypeError("SEQ:HASH, as printed by an earlier verify")
    return int(seq), digest.lower()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="JSONL export file, or - for stdin")
    parser.add_argument("--partial", action="store_true", help="the export was filtered (gaps allowed)")
    parser.add_argument("--anchor", type=_anchor, help="SEQ:HASH that must be in the export (detects a "
                        "chain cut short)")
    args = parser.parse_args(argv)
    if args.path == "-":
        ok, message = verify(sys.stdin, args.partial, args.anchor)
    else:
        with open(args.path, encoding="utf-8") as fh:
            ok, message = verify(fh, args.partial, args.anchor)
    print(message if ok else f"BROKEN: {message}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
