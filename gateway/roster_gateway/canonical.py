"""The request as judged is the request as sent. The control plane matches grants against canonical
forms (controlplane.policy.normalize); an upstream reads what the gateway forwards. So the gateway
forwards only requests that are already canonical and refuses (400) any whose method, host or path
differs from its canonical form: a path with dot segments (plain or percent-encoded), empty segments,
escapes of unreserved characters or lower-case escapes; a method not in upper case; a Host that is not
lower case or ends with a dot; a port with leading zeros. A path with no canonical form at all (an
encoded '/', a dot segment with ';' parameters in any encoding: `..;`, `..%3B`, `.%253B`, `%2e%2e%3b`,
which a server that decodes and strips parameters reads as '.' or '..') is left to the control plane,
which denies it. docs/grants.md states the rule.

This module's path rules agree with the control plane's normaliser through one shared table of cases
(tests/contract/canonical/paths.json), checked on both sides."""

from __future__ import annotations

import functools
import re

_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_HEX = frozenset("0123456789abcdefABCDEF")
_PATH_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/")
_DECODE_ROUNDS = 8  # as the control plane's normaliser: more rounds than this and the path is unreadable
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
# Answers for paths and hosts up to this long are remembered (a box repeats its destinations on every
# request; both checks are pure). Standard library only, as the rest of this module (the control plane's
# tests load it from its file): the same rule as roster_gateway.memo.
_REMEMBERED_CHARS = 512
_REMEMBERED = 4096


class Unreadable(ValueError):
    """No canonical form (an encoded '/', a control character, ...): the control plane denies these."""


def canonical_path(path: str) -> str:
    """The canonical form of a path (query excluded) as the control plane computes it, for the forms that
    have one; Unreadable for the forms the control plane rejects outright."""
    if path == "":
        path = "/"
    if not path.startswith("/"):
        raise Unreadable("path must start with '/'")
    decoded = _decode_unreserved(path)
    segments: list[str] = []
    for segment in decoded.split("/")[1:]:
        if segment in ("", "."):
            continue
        if segment == "..":
            if not segments:
                raise Unreadable("path climbs above the root with '..'")
            segments.pop()
            continue
        if _reads_as_dot_segment(segment):
            raise Unreadable("path has a segment a server could read as a dot segment")
        if any(t in segment.upper() for t in ("%252E", "%252F", "%255C")):
            raise Unreadable("path has a double-encoded '.', '/' or '\\'")
        segments.append(segment)
    trailing = decoded.endswith("/") and segments and not decoded.endswith(("/.", "/.."))
    result = "/" + "/".join(segments)
    return result + "/" if trailing and result != "/" else result


def _reads_as_dot_segment(segment: str) -> bool:
    """Whether a server that percent-decodes a segment, once or more (%3B, %253B, %2e), and strips ';' path
    parameters could read it as '.' or '..' (the control plane's rule: such a path has no canonical form)."""
    if "%" not in segment:
        return segment.split(";", 1)[0] in (".", "..")
    decoded = segment
    for _ in range(_DECODE_ROUNDS):
        again = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), decoded)
        if again == decoded:
            return decoded.split(";", 1)[0] in (".", "..")
        decoded = again
    raise Unreadable("path has a segment percent-encoded too many times over")


def _decode_unreserved(path: str) -> str:
    out: list[str] = []
    i, n = 0, len(path)
    while i < n:
        c = path[i]
        if c == "%":
            pair = path[i + 1:i + 3]
            if len(pair) != 2 or not set(pair) <= _HEX:
                raise Unreadable("path has a malformed percent-escape")
            byte = int(pair, 16)
            if byte in (0x2F, 0x5C) or byte < 0x20 or byte == 0x7F:
                raise Unreadable("path has an encoded '/', backslash or control character")
            out.append(chr(byte) if byte in _UNRESERVED else "%" + pair.upper())
            i += 3
            continue
        if c == "\\" or ord(c) < 0x20 or ord(c) == 0x7F:
            raise Unreadable("path has a backslash or a control character")
        out.append(c if c in _PATH_SAFE else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass")))
        i += 1
    return "".join(out)


def path_refusal(target: str) -> str | None:
    """Why a request target (path and query) may not be forwarded as sent, or None. A target with no
    canonical form at all is left to the control plane, which denies it."""
    path, _, _query = target.partition("?")
    if len(path) <= _REMEMBERED_CHARS:
        return _remembered_path_refusal(path)
    return _path_refusal(path)


def _path_refusal(path: str) -> str | None:
    try:
        canonical = canonical_path(path)
    except Unreadable:
        return None
    if canonical != path:
        return f"the path is not in canonical form (it would be judged as {canonical[:200]!r}); send that"
    return None


_remembered_path_refusal = functools.lru_cache(maxsize=_REMEMBERED)(_path_refusal)


def method_refusal(method: str) -> str | None:
    if method != method.upper():
        return f"the method {method[:16]!r} is not in upper case; send {method[:16].upper()!r}"
    return None


def host_refusal(host_header: str) -> str | None:
    """The Host header (or absolute-form authority) as sent: lower case, no trailing dot, no port with
    leading zeros. Parsing and agreement with the destination are shapes.check_authority's."""
    if len(host_header) <= _REMEMBERED_CHARS:
        return _remembered_host_refusal(host_header)
    return _host_refusal(host_header)


def _host_refusal(host_header: str) -> str | None:
    value = host_header.strip()
    host, port = value, ""
    if value.startswith("["):
        end = value.find("]")
        host, port = value[:end + 1], value[end + 2:] if end >= 0 else ""
    elif value.count(":") == 1:
        host, _, port = value.partition(":")
    if host != host.lower():
        return "the Host is not in lower case; send it in lower case"
    if host.endswith("."):
        return "the Host ends with a dot; send it without"
    if len(port) > 1 and port.startswith("0"):
        return "the port has leading zeros"
    return None


_remembered_host_refusal = functools.lru_cache(maxsize=_REMEMBERED)(_host_refusal)
