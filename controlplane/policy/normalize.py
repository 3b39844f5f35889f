"""Canonical forms of hosts and paths, so that matching never sees two spellings of one target.

Anything ambiguous is rejected (NormalizationError) rather than guessed at: the caller turns a
rejection into a deny. The gateway forwards the request as received, so a form that an upstream
server could read differently from us (encoded '/', backslashes, dot segments with ';' parameters,
raw or encoded once or more) must not match.
"""

from __future__ import annotations

import ipaddress
import re

DEFAULT_PORTS = {"http": 80, "https": 443, "tunnel": 443}
MAX_HOST_LENGTH = 253
MAX_LABEL_LENGTH = 63
_LABEL_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# A server that decodes twice would read these as '.', '/' or '\'.
_DOUBLE_ENCODED = ("%252E", "%252F", "%255C")
# How many times a segment is percent-decoded to see what a server that decodes repeatedly would read;
# one still changing after that many rounds has no canonical form.
_DECODE_ROUNDS = 8
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_HEX = frozenset("0123456789abcdefABCDEF")
# Raw characters allowed in a path as sent (RFC 3986 pchar plus '/'); anything else is encoded or rejected.
_PATH_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/")


class NormalizationError(ValueError):
    """The host or path cannot be put in one canonical form; treat the request as unmatched."""


def normalize_host(host: str) -> str:
    """Lowercase, one trailing dot stripped, IDNA (punycode) for non-ASCII, IP literals canonical.
    Rejects ports, userinfo, percent-encoding, empty labels and characters outside a hostname."""
    if not isinstance(host, str) or not host:
        raise NormalizationError("host is empty")
    h = host.strip()
    if h != host:
        raise NormalizationError("host has surrounding whitespace")
    if h.startswith("[") or ":" in h:
        return _normalize_ipv6(h)
    if any(c in h for c in "@%/\\?#") or any(ord(c) < 0x21 or ord(c) == 0x7F for c in h):
        raise NormalizationError(f"host {host!r} contains a character that is not allowed in a host name")
    if h.endswith("."):
        h = h[:-1]
    if not h:
        raise NormalizationError("host is empty")
    h = h.lower()
    if not h.isascii():
        h = _idna(h, host)
    labels = h.split(".")
    if any(label == "" for label in labels):
        raise NormalizationError(f"host {host!r} has an empty label")
    if labels[-1].isdigit() or all(label.isdigit() for label in labels):
        return _normalize_ipv4(h, host)
    for label in labels:
        if len(label) > MAX_LABEL_LENGTH or not _LABEL_RE.match(label):
            raise NormalizationError(f"host {host!r} has an invalid label {label!r}")
    if len(h) > MAX_HOST_LENGTH:
        raise NormalizationError("host is longer than 253 characters")
    return h


def _idna(h: str, original: str) -> str:
    try:
        encoded = h.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise NormalizationError(f"host {original!r} is not a valid internationalised name") from exc
    # Look-alikes that IDNA folds to plain ASCII (fullwidth letters, ideographic full stops) are refused:
    # a name that is ASCII after mapping should have been sent as ASCII.
    labels = h.split(".")
    if len(labels) != len(encoded.split(".")) or any(
        not orig.isascii() and not enc.startswith("xn--")
        for orig, enc in zip(labels, encoded.split("."), strict=True)
    ):
        raise NormalizationError(f"host {original!r} uses characters that fold to a different ASCII name")
    return encoded


def _normalize_ipv4(h: str, original: str) -> str:
    # Only the plain dotted quad is accepted: "127.1", "0x7f.0.0.1" or "2130706433" are tricks.
    parts = h.split(".")
    if len(parts) != 4 or any(not p.isdigit() or (len(p) > 1 and p.startswith("0")) for p in parts):
        raise NormalizationError(f"host {original!r} is not a dotted-quad IPv4 address")
    try:
        return str(ipaddress.IPv4Address(h))
    except ValueError as exc:
        raise NormalizationError(f"host {original!r} is not a valid IPv4 address") from exc


def _normalize_ipv6(h: str) -> str:
    inner = h[1:-1] if h.startswith("[") and h.endswith("]") else h
    if "%" in inner or "[" in inner or "]" in inner:
        raise NormalizationError(f"host {h!r} is not a valid IPv6 literal (zone ids and ports are rejected)")
    try:
        addr = ipaddress.IPv6Address(inner)
    except ValueError as exc:
        raise NormalizationError(f"host {h!r} is neither a host name nor an IPv6 literal (no ports)") from exc
    return f"[{addr.compressed}]"


def normalize_port(port: int | None, scheme: str) -> int:
    """The explicit port, or the scheme's default when none was given."""
    if port is None:
        if scheme not in DEFAULT_PORTS:
            raise NormalizationError(f"scheme {scheme!r} has no default port")
        return DEFAULT_PORTS[scheme]
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise NormalizationError(f"port {port!r} is out of range 1-65535")
    return port


def split_path(raw: str) -> tuple[str, str]:
    """Split "path?query" into its parts; the query is kept as sent and never matched."""
    if not isinstance(raw, str):
        raise NormalizationError("path is not text")
    if "#" in raw:
        raise NormalizationError("path contains a fragment")
    path, _, query = raw.partition("?")
    return path, query


def normalize_path(raw: str) -> str:
    """Canonical path (query removed): unreserved percent-escapes decoded, other escapes upper-cased,
    dot segments (also encoded ones) resolved, '//' collapsed. Rejects encoded '/' and '\\', NUL and
    control characters, backslashes, dot segments with ';' parameters in any encoding ('..;', '..%3B',
    '.%253B', '%2e%2e%3b', …) and '..' that climbs above the root."""
    path, _ = split_path(raw)
    if path == "":
        path = "/"
    if not path.startswith("/"):
        raise NormalizationError("path must start with '/'")
    decoded = _decode_unreserved(path)
    segments: list[str] = []
    for segment in decoded.split("/")[1:]:
        if segment in ("", "."):
            continue
        if segment == "..":
            if not segments:
                raise NormalizationError("path climbs above the root with '..'")
            segments.pop()
            continue
        if _reads_as_dot_segment(segment):
            raise NormalizationError("path has a segment a server could read as a dot segment "
                                     "(';' parameters, raw or encoded, or an encoding repeated)")
        if any(t in segment.upper() for t in _DOUBLE_ENCODED):
            raise NormalizationError("path has a double-encoded '.', '/' or '\\'")
        segments.append(segment)
    trailing = decoded.endswith("/") and segments and not decoded.endswith(("/.", "/.."))
    result = "/" + "/".join(segments)
    if trailing and result != "/":
        result += "/"
    return result


def _reads_as_dot_segment(segment: str) -> bool:
    """Whether a server could read this segment (not itself '.' or '..') as '.' or '..': one that
    percent-decodes it, once or more (%3B, %253B, %2e), and strips ';' path parameters. The gateway
    forwards the path as sent, so such a segment must not be judged as the ordinary name it looks like."""
    if "%" not in segment:
        return segment.split(";", 1)[0] in (".", "..")
    decoded = segment
    for _ in range(_DECODE_ROUNDS):
        again = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), decoded)
        if again == decoded:
            return decoded.split(";", 1)[0] in (".", "..")
        decoded = again
    raise NormalizationError("path has a segment percent-encoded too many times over")


def _decode_unreserved(path: str) -> str:
    out: list[str] = []
    i, n = 0, len(path)
    while i < n:
        c = path[i]
        if c == "%":
            hexpair = path[i + 1 : i + 3]
            if len(hexpair) != 2 or not set(hexpair) <= _HEX:
                raise NormalizationError("path has a malformed percent-escape")
            byte = int(hexpair, 16)
            if byte == 0x2F:
                raise NormalizationError("path has an encoded '/' (%2F)")
            if byte == 0x5C:
                raise NormalizationError("path has an encoded backslash (%5C)")
            if byte < 0x20 or byte == 0x7F:
                raise NormalizationError("path has an encoded control character or NUL")
            out.append(chr(byte) if byte in _UNRESERVED else "%" + hexpair.upper())
            i += 3
            continue
        if c == "\\":
            raise NormalizationError("path has a backslash")
        if ord(c) < 0x20 or ord(c) == 0x7F:
            raise NormalizationError("path has a control character or NUL")
        if c in _PATH_SAFE:
            out.append(c)
        else:
            # Non-ASCII or otherwise unsafe raw characters get their canonical escaped form.
            out.append("".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass")))
        i += 1
    return "".join(out)
