"""Placeholders in presets: `{name}` with a lowercase name, filled from the run's facts. Which names a field
may use is fixed per field (docs/presets.md); any `{name}` that is not allowed there is an error, so a typo
never reaches a box. Other braces are literal (JSON content, OpenCode's `{env:VAR}`), and `{{name}}` writes
a literal `{name}`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# `{{name}}` (an escape) or `{name}`; nothing else is a placeholder.
_TOKEN = re.compile(r"\{\{([a-z_]+)\}\}|\{([a-z_]+)\}")

COMMAND = frozenset({"prompt", "prompt_file", "input_file", "model", "base_url", "key_variable", "workspace"})
ENV = frozenset({"prompt_file", "input_file", "model", "base_url", "key_variable", "workspace"})
FILES = ENV
PATHS = frozenset({"base_path"})
INJECT = frozenset({"secret"})  # a grant's inject_format: filled by the gateway in transit, never here
IMAGE = frozenset({"box_tag"})


def placeholders_in(text: str) -> list[str]:
    """The placeholder names `text` uses (escapes excluded), in order."""
    return [m.group(2) for m in _TOKEN.finditer(text) if m.group(2)]


def unknown_placeholders(text: str, allowed: Iterable[str]) -> list[str]:
    allowed = frozenset(allowed)
    return sorted({name for name in placeholders_in(text) if name not in allowed})


def check(text: str, allowed: Iterable[str]) -> str:
    """"" when every placeholder in `text` is allowed, else a message naming the unknown ones."""
    allowed = frozenset(allowed)
    bad = unknown_placeholders(text, allowed)
    if not bad:
        return ""
    names = ", ".join("{" + b + "}" for b in bad)
    return f"unknown placeholder {names}; allowed here: {', '.join('{' + a + '}' for a in sorted(allowed))}"


def fill(text: str, values: Mapping[str, str]) -> str:
    """`text` with each placeholder replaced by its value and each `{{name}}` by `{name}`. A placeholder
    without a value is an error (validation should have caught it)."""

    def one(match: re.Match) -> str:
        if match.group(1):
            return "{" + match.group(1) + "}"
        name = match.group(2)
        if name not in values:
            raise KeyError(name)
        return values[name]

    return _TOKEN.sub(one, text)
