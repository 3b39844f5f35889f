"""Signed checkpoints (docs/audit.md): on demand (`audit checkpoint`) and on a Celery beat schedule, the
chain is verified, its length and head hash are signed with an Ed25519 key kept outside the database, the
signed line is appended to the checkpoint log (a file outside the database, the operator's to copy
elsewhere) and the checkpoint is recorded in the chain itself. `audit verify` then checks the chain
against the latest checkpoint, so records cut off the end, or a rewrite re-chained from before the
checkpoint, are caught without an anchor from anyone.

Key files (settings): the private key `ROSTER_AUDIT_CHECKPOINT_KEY_FILE` (0600, created on first use),
the public keys `<key file>.pub` (every key ever used, one `KEY_ID BASE64` a line: give it to auditors).
`audit checkpoint --rotate-key` makes a new key; old checkpoints keep verifying by their key id."""

from __future__ import annotations

import base64
import datetime as dt
import fcntl
import os
import stat
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

from controlplane.audit import chain
from controlplane.audit.checkpoint_format import CheckpointError, canonical, key_id, latest, load_public_keys
from controlplane.audit.services import audit_append

__all__ = ["CheckpointError", "make_checkpoint", "latest_checkpoint", "rotate_key", "public_keys_path"]


def key_path() -> Path:
    return Path(settings.ROSTER_AUDIT_CHECKPOINT_KEY_FILE)


def public_keys_path() -> Path:
    return key_path().with_name(key_path().name + ".pub")


def log_path() -> Path:
    return Path(settings.ROSTER_AUDIT_CHECKPOINT_LOG)


def _raw_public(private: Ed25519PrivateKey) -> bytes:
    return private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _write_new_key() -> Ed25519PrivateKey:
    private = Ed25519PrivateKey.generate()
    raw = private.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                serialization.NoEncryption())
    path = key_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # The public key is published first: a key whose checkpoints nobody could check is never used.
    public = _raw_public(private)
    _append_line(public_keys_path(), f"{key_id(public)} {base64.b64encode(public).decode()}\n", mode=0o644)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(base64.b64encode(raw) + b"\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return private


def _load_key() -> Ed25519PrivateKey:
    path = key_path()
    if not path.exists():
        return _write_new_key()
    st = path.stat()
    if st.st_mode & 0o077:
        raise CheckpointError(f"checkpoint key file {path} has mode {stat.S_IMODE(st.st_mode):04o}; other "
                              f"users could read it. Run `chmod 600 {path}`.")
    try:
        raw = base64.b64decode(path.read_bytes().strip(), validate=True)
        return Ed25519PrivateKey.from_private_bytes(raw)
    except ValueError:
        raise CheckpointError(f"checkpoint key file {path} does not hold an Ed25519 private key") from None


def _append_line(path: Path, line: str, *, mode: int) -> None:
    """One line appended whole (O_APPEND, under an exclusive lock, flushed to disk)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def rotate_key() -> str:
    """A new signing key; the old public key stays in the public keys file. Returns the new key id."""
    return key_id(_raw_public(_write_new_key()))


def latest_checkpoint() -> dict | None:
    """The checkpoint log's last checkpoint, every line's signature checked; None if there is none."""
    keys = load_public_keys(public_keys_path()) if public_keys_path().exists() else {}
    return latest(log_path(), keys)


def make_checkpoint(*, by: str = "cli") -> dict:
    """Verify the chain (against the previous checkpoint), sign its length and head, append the signed
    line to the log, record it in the chain. A broken chain is never signed."""
    from controlplane.audit.verify import verify_database

    previous = latest_checkpoint()
    result = verify_database(_anchor(previous))
    if not result.ok:
        raise CheckpointError(f"the chain is broken, not signing it: {result.message}")
    private = _load_key()
    statement = {"v": 1, "seq": result.checked, "head": result.head,
                 "time": chain.format_time(dt.datetime.now(dt.UTC)), "key": key_id(_raw_public(private))}
    signature = base64.b64encode(private.sign(canonical(statement))).decode()
    line = canonical({"statement": statement, "signature": signature}).decode() + "\n"
    _append_line(log_path(), line, mode=0o644)
    audit_append("checkpoint", {**statement, "signature": signature, "log": str(log_path()), "by": by})
    return statement


def _anchor(checkpoint: dict | None) -> tuple[int, str] | None:
    if checkpoint is None or checkpoint["seq"] == 0:
        return None
    return checkpoint["seq"], checkpoint["head"]


def verify_against_latest(workers: int | None = None):
    """`audit verify` by default: the chain, anchored at the latest checkpoint. Returns (result, note)."""
    from controlplane.audit.verify import verify_database

    checkpoint = latest_checkpoint()
    result = verify_database(_anchor(checkpoint), workers=workers)
    if checkpoint is None:
        return result, "no checkpoint yet: records cut off the end would not be detected (`audit checkpoint`)"
    after = max(result.checked - checkpoint["seq"], 0)
    return result, (f"checkpoint seq {checkpoint['seq']} of {checkpoint['time']} (key {checkpoint['key']}) "
                    f"holds; {after} record(s) after it")
