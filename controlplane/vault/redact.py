"""What of an egress request may be written down (audit records, approvals, run decisions, trace index).
Vault sentinels are masked wherever they occur (as `[sentinel of NAME]`; one hidden behind
percent-escapes masks its whole piece as `[masked]`), and so are the values of credential-looking query
parameters (`key=`, `token=`, `access_token=`, `api_key=`, `sig=`, ...). A sentinel is not the secret,
but a recorded one would let anyone who reads the log correlate or replay it. Matching and approval
digests use the request as received; only the record is masked.

The one definition of a credential-looking name (`is_credential_name`, for query parameters and header
names alike) and of the mask written in place of a value (`MASK`): approval snapshots and the approval
pages use these too."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from urllib.parse import unquote_plus

from controlplane.vault.services import mask_sentinels

MASK = "[masked]"
# A query parameter or header whose (decoded, lower-cased) name contains one of these, or is one of the
# names, carries a credential (authorization, x-api-key, x-amz-security-token, private-token, ...).
_CREDENTIAL_FRAGMENTS = ("key", "token", "secret", "passw", "auth", "signature", "credential", "session",
                         "cookie", "private")
_CREDENTIAL_NAMES = frozenset({"sig", "pw", "pwd", "pass", "code", "jwt", "bearer"})
_QUERY_SPLIT = re.compile(r"([&;])")


def _mask_literals(text: str, extra: Iterable[str]) -> str:
    for sentinel in extra:
        if sentinel:
            text = text.replace(sentinel, MASK)
    return text


def text_for_record(text: str, extra: Iterable[str] = ()) -> str:
    """`text` with sentinels masked; a piece hiding a sentinel behind percent-escapes is masked whole."""
    if not isinstance(text, str) or not text:
        return text
    extra = tuple(extra)
    masked = _mask_literals(mask_sentinels(text), extra)
    if "%" not in masked:
        return masked
    pieces = re.split(r"([/?&;=])", masked)
    for i, piece in enumerate(pieces):
        if "%" in piece:
            decoded = unquote_plus(piece)
            if _mask_literals(mask_sentinels(decoded), extra) != decoded:
                pieces[i] = MASK
    return "".join(pieces)


def is_credential_name(name: str) -> bool:
    """Whether a query parameter or header of this name carries a credential, whatever its value."""
    lowered = unquote_plus(name).strip().lower()
    return lowered in _CREDENTIAL_NAMES or any(f in lowered for f in _CREDENTIAL_FRAGMENTS)


def url_for_record(url: str, extra: Iterable[str] = ()) -> str:
    """A URL (or path with query) as it may be recorded: sentinels and credential parameter values masked."""
    if not isinstance(url, str) or not url:
        return url
    masked = text_for_record(url, extra)
    base, sep, query = masked.partition("?")
    if not sep:
        return masked
    parts = _QUERY_SPLIT.split(query)
    for i in range(0, len(parts), 2):  # odd indexes are the separators themselves
        name, eq, value = parts[i].partition("=")
        if eq and value and is_credential_name(name):
            parts[i] = f"{name}={MASK}"
    return f"{base}?{''.join(parts)}"


def mcp_for_record(mcp: Sequence[Sequence[str | None]]) -> list[list[str | None]]:
    """MCP (method, tool) pairs as they may be recorded (a tool name is box-chosen text)."""
    return [[text_for_record(m) if isinstance(m, str) else m for m in call] for call in mcp]
