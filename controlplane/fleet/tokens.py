"""Run tokens: the box's proxy credential. Random, single-use per run; only the SHA-256 is stored, so a
database read never yields a usable token."""

from __future__ import annotations

import functools
import hashlib
import ipaddress
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


@functools.lru_cache(maxsize=4096)  # pure; every decision parses its box's address and the gateway's peer
def _address(text: str) -> str | None:
    """The address in its one written form (an IPv4-mapped IPv6 address as IPv4), or None if not one."""
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


def token_address_problem(client: str | None, box_address: str | None) -> str:
    """Why a run's token must not be accepted from `client` (the peer address of the connection it came
    in on, as the gateway reports it), or "" when it came from the run's own box. A token is bound to its
    box: one read from the host (`docker inspect`) or another box is refused. The words go into the
    bad_token audit record (the trusted side's), never to the box."""
    if not client:
        return "the gateway reported no client address for the token"
    presented = _address(client)
    if presented is None:
        return "the gateway reported an unreadable client address for the token"
    box = _address(box_address) if box_address else None
    if box is None:
        return f"token presented from {presented}, run's box address is not recorded"
    if presented != box:
        return f"token presented from {presented}, run's box is {box}"
    return ""
