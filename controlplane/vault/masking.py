"""What an approver may see of a held request. The snapshot is already masked by the decision service;
this masks again on display (defence in depth): credential-like headers, and any vault sentinel anywhere
in the headers, URL or body preview. The box is hostile, so everything here is shown as inert data."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping

from controlplane.vault.models import Secret
from controlplane.vault.redact import MASK, is_credential_name

# Characters that change how text reads without showing themselves (bidi overrides and isolates,
# zero-width marks, controls, line separators): a box could make an approver read something else.
_HIDDEN_CATEGORIES = {"Cc", "Cf", "Zl", "Zp"}
_SHOWN_CONTROLS = "\n\r\t"


def visible(text: str) -> str:
    """Every invisible or reordering character as a \\uXXXX escape, so what is shown is what is sent."""
    return "".join(
        f"\\u{ord(ch):04x}" if unicodedata.category(ch) in _HIDDEN_CATEGORIES and ch not in _SHOWN_CONTROLS
        else ch for ch in text)


def known_sentinels() -> dict[str, str]:
    """sentinel value -> secret name (the name helps the approver; the sentinel itself is hidden)."""
    return dict(Secret.objects.values_list("sentinel", "name"))


def mask_text(text: str, sentinels: Mapping[str, str]) -> str:
    for sentinel, name in sentinels.items():
        if sentinel and sentinel in text:
            text = text.replace(sentinel, f"[sentinel of {name}]")
    return visible(text)


def _pairs(headers) -> Iterable[tuple[str, str]]:
    if isinstance(headers, Mapping):
        return [(str(k), str(v)) for k, v in headers.items()]
    pairs = []
    for item in headers or []:
        if isinstance(item, (list, tuple)) and len(item) == 2:
            pairs.append((str(item[0]), str(item[1])))
    return pairs


def mask_headers(headers, sentinels: Mapping[str, str]) -> list[tuple[str, str]]:
    out = []
    for name, value in _pairs(headers):
        if is_credential_name(name):
            hint = mask_text(value, sentinels)
            # Keep only the sentinel's name if one was there; never any part of the value.
            named = re.findall(r"\[sentinel of [^\]]+\]", hint)
            out.append((visible(name), f"{MASK} {' '.join(named)}".strip()))
        else:
            out.append((visible(name), mask_text(value, sentinels)))
    return out
