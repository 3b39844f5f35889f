"""Remembering the answers of pure functions of one short string (a host, an authority, a path): a box
sends the same few destinations on every request, and each answer costs Python work per request. Only
strings up to SHORT characters are remembered, at most MAX_ENTRIES per function, so a box sending
endless distinct values costs bounded memory (those just miss and are worked out afresh). What is
remembered is what a box sent, read before any secret is injected: never a secret's value."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
SHORT = 512
MAX_ENTRIES = 4096


def remembered(fn: Callable[[str], T]) -> Callable[[str], T]:
    """`fn` with its answers for short strings remembered; `fn` must depend on its argument only."""
    cached = functools.lru_cache(maxsize=MAX_ENTRIES)(fn)

    @functools.wraps(fn)
    def call(value: str) -> T:
        if isinstance(value, str) and len(value) <= SHORT:
            return cached(value)
        return fn(value)

    return call
