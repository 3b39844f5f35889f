"""Apply an allow decision's secrets: set `inject` headers and swap `replace` sentinels in header values,
also inside HTTP Basic credentials (base64 `user:password`), which the control plane's tripwire decodes
too. The control plane sends only the secret the matched grant names, toward the host it names."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence

from mitmproxy import http

from roster_gateway.wire import WireDecision

# The same shape the control plane's tripwire decodes (controlplane.vault.services._BASIC_RE).
_BASIC = re.compile(r"(basic\s+)([A-Za-z0-9+/=_-]{8,})", re.IGNORECASE)


class SwapRefused(Exception):
    """A sentinel the decision names sits where it cannot be swapped exactly; the request is refused."""


def _swap_text(text: str, replace: Sequence[tuple[str, str]]) -> str:
    for sentinel, real in replace:
        text = text.replace(sentinel, real)
    return text


_STANDARD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _lenient_readings(token: str) -> list[str]:
    """How forgiving servers might read a token that is not strict base64: standard or url-safe
    alphabet, stray characters dropped, padding ignored."""
    readings = []
    for text in (token, token.translate(str.maketrans("-_", "+/"))):
        kept = "".join(c for c in text if c in _STANDARD)
        kept = kept[: len(kept) - (len(kept) % 4 == 1)]  # a lone trailing sextet carries no byte
        try:
            readings.append(base64.b64decode(kept + "=" * (-len(kept) % 4)).decode("utf-8", "replace"))
        except (binascii.Error, ValueError):
            continue
    return readings


def _swap_credentials(token: str, replace: Sequence[tuple[str, str]], built: list[tuple[str, str]]) -> str:
    try:
        raw = base64.b64decode(token, validate=True)
    except (binascii.Error, ValueError):
        if any(sentinel in reading for reading in _lenient_readings(token) for sentinel, _ in replace):
            raise SwapRefused("Basic credentials carrying a sentinel are not valid base64") from None
        return token  # not credentials at all (e.g. prose); nothing of ours inside
    text = raw.decode("utf-8", "surrogateescape")
    user, colon, password = text.partition(":")
    new_user = _swap_text(user, replace)
    if ":" in new_user:
        # user-id may not contain ':' (RFC 7617): the secret would be split between user and password.
        raise SwapRefused("a secret containing ':' cannot stand in a Basic user-id")
    swapped = new_user + colon + _swap_text(password, replace)
    if swapped == text:
        return token
    built.append((swapped, text))  # (real pair, sentinel pair): an echo of the pair is scrubbed back
    return base64.b64encode(swapped.encode("utf-8", "surrogateescape")).decode("ascii")


def _swap_value(text: str, replace: Sequence[tuple[str, str]], built: list[tuple[str, str]]) -> str:
    text = _BASIC.sub(lambda m: m.group(1) + _swap_credentials(m.group(2), replace, built), text)
    return _swap_text(text, replace)


def apply_secrets(request: http.Request, decision: WireDecision,
                  built: list[tuple[str, str]] | None = None) -> int:
    """Returns how many header values changed (for logs; never the values themselves). Raises
    SwapRefused, with no header changed, when a named sentinel cannot be swapped exactly. `built`
    collects (real, sentinel) plain texts of the Basic credentials swapped, for response scrubbing."""
    built = [] if built is None else built
    changed = 0
    if decision.replace:
        fields = []
        for name, value in request.headers.fields:
            text = value.decode("utf-8", "surrogateescape")
            new = _swap_value(text, decision.replace, built)
            if new != text:
                changed += 1
            fields.append((name, new.encode("utf-8", "surrogateescape") if new != text else value))
        request.headers.fields = tuple(fields)
    for header, value in decision.inject:
        request.headers[header] = value
        changed += 1
    return changed
