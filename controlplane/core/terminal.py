"""Text for a terminal from data a box controls: one line per record, nothing a terminal would act on.

A box chooses its command's arguments, its output and the requests it makes; printed raw, a newline would
forge a second record and an escape sequence would rewrite the screen. Commands are shown as a shell
would quote them (ANSI-C $'…' quoting where an argument holds control characters), other text with its
controls escaped."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

# C0 controls (newline and tab included), DEL and C1, and the Unicode line/paragraph separators.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"


def one_line(text: str, limit: int | None = None) -> str:
    """Controls escaped (\\n, \\t, \\x1b, ...), optionally cut to `limit` characters with an ellipsis."""
    text = _CONTROLS.sub(lambda m: _escape(m.group()), str(text))
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


def _quote(arg: str) -> str:
    if not _CONTROLS.search(arg):
        return shlex.quote(arg)
    body = "".join("\\\\" if ch == "\\" else "\\'" if ch == "'" else _escape(ch) if _CONTROLS.match(ch)
                   else ch for ch in arg)
    return f"$'{body}'"


def shell_line(argv: Sequence[str]) -> str:
    """The command as one shell line: each argument quoted so that pasting it runs the same argv."""
    return " ".join(_quote(str(arg)) for arg in argv)
