"""Run tokens: the box's proxy credential. Random, single-use per run; only the SHA-256 is stored, so a
database read never yields a usable token."""

from __future__ import annotations

import hashlib
import secrets

TOKEN_PREFIX = "rt_"
TOKEN_RANDOM_BYTES = 32
# "rt_" + urlsafe base64 of 32 bytes (43 chars); anything much longer is not ours and is not hashed.
TOKEN_MAX_LENGTH = 64


def token_new() -> tuple[str, str]:
    """A fresh raw token and its hash. The raw value is handed out once and never stored."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_RANDOM_BYTES)
    return raw, token_hash(raw)


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def token_is_well_formed(raw: str) -> bool:
    return isinstance(raw, str) and raw.startswith(TOKEN_PREFIX) and len(raw) <= TOKEN_MAX_LENGTH
