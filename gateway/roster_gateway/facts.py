"""What the gateway tells /decide about a request (docs/wire.md), and the token that identifies the run."""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
from collections.abc import Sequence

from mitmproxy import http

from roster_gateway.mcp import McpCall
from roster_gateway.memo import remembered
from roster_gateway.shapes import normalise_host

HOP_BY_HOP = ("proxy-authorization", "proxy-connection", "proxy-authenticate")
# Matched as mitmproxy matches header names: bytes.lower().
_HOP_BY_HOP_FIELDS = frozenset(name.encode() for name in HOP_BY_HOP)


def token_from_header(value: str | None) -> str:
    """The raw run token from Proxy-Authorization: Basic with the token as password, or Bearer.
    "" when missing or unreadable (the control plane answers bad_token)."""
    if not value:
        return ""
    scheme, _, rest = value.strip().partition(" ")
    scheme = scheme.lower()
    rest = rest.strip()
    if scheme == "bearer":
        return rest
    if scheme == "basic":
        try:
            decoded = base64.b64decode(rest, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return ""
        _user, sep, password = decoded.partition(":")
        return password if sep else ""
    return ""


def client_address(flow) -> str:
    """The peer address of the box connection the request came in on (IPv4-mapped IPv6 written as IPv4),
    sent with the run token: the control plane accepts a token only from its run's box. "" when not
    known (the control plane refuses it)."""
    peer = getattr(flow.client_conn, "peername", None)
    if not peer:
        return ""
    try:
        return _written_address(peer[0])
    except (ValueError, TypeError, IndexError):
        return ""


@remembered
def _written_address(host: str) -> str:
    """A peer's address as /decide gets it; cached, as the same boxes come back on every request."""
    address = ipaddress.ip_address(host)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


def strip_proxy_headers(request: http.Request) -> None:
    """Every field named in HOP_BY_HOP removed, in one pass over the fields (the order of the rest kept)."""
    headers = request.headers
    kept = tuple(f for f in headers.fields if f[0].lower() not in _HOP_BY_HOP_FIELDS)
    if len(kept) != len(headers.fields):
        headers.fields = kept


def decide_payload(request: http.Request, *, token: str, client: str, scheme: str, mcp: tuple[McpCall, ...],
                   preview_bytes: int, sentinels: Sequence[str] = ()) -> dict:
    body = request.raw_content or b""
    headers = [[k.lower(), v] for k, v in request.headers.items(multi=True) if k.lower() not in HOP_BY_HOP]
    payload = {
        "token": token,
        "client": client,
        "method": request.method.upper(),
        "scheme": scheme,
        "host": normalise_host(request.host),
        "port": request.port,
        "path": request.path if request.method.upper() != "CONNECT" else "",
        "headers": headers,
        "body_size": len(body),
        "body_sha256": hashlib.sha256(body).hexdigest() if body else "",
        "body_preview": body[:preview_bytes].decode("utf-8", errors="replace"),
        "mcp": [c.as_wire() for c in mcp],
    }
    if sentinels:  # sentinels found anywhere in the request (sentinels.py); absent when none
        payload["sentinels"] = list(sentinels)
    return payload
