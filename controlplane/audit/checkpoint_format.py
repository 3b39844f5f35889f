"""Signed checkpoints of the audit chain, as stored and checked: standard library only (the standalone
export verifier loads this file by path), with the Ed25519 check from `cryptography` when it can be
imported (the standard library has no Ed25519).

A checkpoint says "the chain held SEQ records and record SEQ hashed to HEAD at TIME", signed by the
trusted side's checkpoint key. One JSON line of the checkpoint log (a file outside the database):
    {"statement": {"v": 1, "seq": N, "head": "<64 hex>", "time": "...Z", "key": "<key id>"},
     "signature": "<base64 Ed25519 signature over the statement's canonical JSON>"}
The public keys file holds one `KEY_ID BASE64_PUBLIC_KEY` a line; a rotated key's line stays, so old
checkpoints stay verifiable (each names its key id)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

FORMAT_VERSION = 1


class CheckpointError(Exception):
    """A checkpoint, its log or its keys cannot be trusted or read; the message says which."""


def canonical(statement: dict) -> bytes:
    return json.dumps(statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def key_id(public_key_raw: bytes) -> str:
    return hashlib.sha256(public_key_raw).hexdigest()[:16]


def signature_checking_available() -> bool:
    try:
        import cryptography.hazmat.primitives.asymmetric.ed25519  # noqa: F401
    except ImportError:
        return False
    return True


def load_public_keys(path: Path) -> dict[str, bytes]:
    keys: dict[str, bytes] = {}
    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"cannot read the checkpoint public keys file {path}: {exc}") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        kid, _, b64 = line.strip().partition(" ")
        try:
            raw = base64.b64decode(b64, validate=True)
        except ValueError:
            raw = b""
        if len(raw) != 32 or key_id(raw) != kid:
            raise CheckpointError(f"{path} line {number} is not `KEY_ID BASE64_PUBLIC_KEY` of an Ed25519 key")
        keys[kid] = raw
    return keys


def parse_line(line: str, where: str) -> tuple[dict, bytes]:
    try:
        entry = json.loads(line)
        statement, signature = entry["statement"], base64.b64decode(entry["signature"], validate=True)
        seq, head = statement["seq"], statement["head"]
        ok = (statement.get("v") == FORMAT_VERSION and isinstance(seq, int) and seq >= 0
              and isinstance(head, str) and len(head) == 64 and isinstance(statement.get("key"), str)
              and isinstance(statement.get("time"), str))
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise CheckpointError(f"{where} is not a checkpoint line")
    return statement, signature


def check_signature(statement: dict, signature: bytes, public_keys: dict[str, bytes], where: str) -> None:
    """Raise CheckpointError unless the statement is signed by the key it names, a known public key."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    raw = public_keys.get(statement["key"])
    if raw is None:
        raise CheckpointError(f"{where} is signed with key {statement['key']}, which is not in the public "
                              "keys file")
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, canonical(statement))
    except InvalidSignature:
        raise CheckpointError(f"{where} has a bad signature: the checkpoint log was altered") from None


def latest(log_path: Path, public_keys: dict[str, bytes] | None) -> dict | None:
    """The log's last checkpoint (None for a missing or empty log), its signature checked unless
    `public_keys` is None (no Ed25519 available: the caller says so). Every line must parse: a damaged
    line is an altered log, not one to skip."""
    try:
        lines = Path(log_path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"cannot read the checkpoint log {log_path}: {exc}") from None
    found = None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"checkpoint log {log_path} line {number}"
        statement, signature = parse_line(line, where)
        if found is not None and statement["seq"] < found["seq"]:
            raise CheckpointError(f"{where} names seq {statement['seq']}, before the previous checkpoint's "
                                  f"{found['seq']}: the log was altered")
        if public_keys is not None:
            check_signature(statement, signature, public_keys, where)
        found = statement
    return found
