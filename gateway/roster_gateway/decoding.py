"""Bounded decoding of response bodies on flows that carried a secret. The scrubber must read the decoded
body, and a small compressed body can inflate to gigabytes (a bomb from a granted upstream would take
down the gateway every box shares). Secret-carrying requests therefore only offer encodings that can be
inflated with a bound (gzip, deflate), and a response in any other encoding is refused."""

from __future__ import annotations

import zlib

from mitmproxy import http

BOUNDED_ENCODINGS = {"gzip": (zlib.MAX_WBITS | 16,), "x-gzip": (zlib.MAX_WBITS | 16,),
                     "deflate": (zlib.MAX_WBITS, -zlib.MAX_WBITS), "identity": ()}


class DecodeRefused(Exception):
    """The body is in an encoding that can't be inflated with a bound, is corrupt, or is too large."""


def narrow_accept_encoding(request: http.Request) -> None:
    """Offer the upstream only the encodings the scrubber can inflate with a bound (never adds one)."""
    offered = request.headers.get("accept-encoding")
    if offered is None:
        return
    kept = [part.strip() for part in offered.split(",")
            if part.split(";")[0].strip().lower() in BOUNDED_ENCODINGS]
    request.headers["accept-encoding"] = ", ".join(kept) if kept else "identity"


def content_codings(message: http.Message) -> list[str]:
    return [c.strip().lower() for v in message.headers.get_all("content-encoding") for c in v.split(",")
            if c.strip()]


def _inflate(data: bytes, wbits_choices: tuple[int, ...], limit: int) -> bytes:
    error: Exception | None = None
    for wbits in wbits_choices:
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(data, limit + 1)
        except zlib.error as exc:
            error = exc
            continue
        if len(out) > limit or inflater.unconsumed_tail:
            raise DecodeRefused(f"decoded body larger than {limit} bytes")
        return out
    raise DecodeRefused(f"corrupt compressed body: {error}")


def bounded_content(message: http.Message, limit: int) -> bytes:
    """The decoded body, never more than `limit` bytes. Raises DecodeRefused."""
    data = message.raw_content or b""
    for coding in reversed(content_codings(message)):
        if coding not in BOUNDED_ENCODINGS:
            raise DecodeRefused(f"content-encoding {coding!r} cannot be inflated with a bound")
        if BOUNDED_ENCODINGS[coding]:
            data = _inflate(data, BOUNDED_ENCODINGS[coding], limit)
    return data
