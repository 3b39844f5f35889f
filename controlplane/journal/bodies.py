"""Content-addressed bodies (docs/journal.md). A chat or messages request that parses is cut at its
messages: the bytes before the list's first message, each message, the bytes between, the rest. Each piece
is stored once under its SHA-256 and the call names the pieces in order, so joining them gives back the
request byte for byte, and the same message sent again in the next call's history is not stored again.
Any other body (a response, a body that does not parse) is one piece."""

from __future__ import annotations

import hashlib
import json
from json.decoder import scanstring

from controlplane.journal.models import JournalBody

# The request keys that hold the conversation: chat completions and Anthropic messages `messages`, the
# Responses API `input` (when it is a list of items).
MESSAGE_KEYS = ("messages", "input")
_WS = " \t\n\r"
_DECODER = json.JSONDecoder()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WS:
        at += 1
    return at


def _message_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each element of the top-level object's message list; [] when there is none or
    the text is not such an object. Positions are in characters of `text`."""
    at = _skip(text, 0)
    if at >= len(text) or text[at] != "{":
        return []
    at = _skip(text, at + 1)
    while at < len(text) and text[at] == '"':
        key, at = scanstring(text, at + 1)
        at = _skip(text, at)
        if at >= len(text) or text[at] != ":":
            return []
        at = _skip(text, at + 1)
        if key in MESSAGE_KEYS and at < len(text) and text[at] == "[":
            return _elements(text, at)
        _value, at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        if at < len(text) and text[at] == ",":
            at = _skip(text, at + 1)
    return []


def _elements(text: str, at: int) -> list[tuple[int, int]]:
    spans = []
    at = _skip(text, at + 1)
    while at < len(text) and text[at] != "]":
        _value, end = _DECODER.raw_decode(text, at)
        spans.append((at, end))
        at = _skip(text, end)
        if at < len(text) and text[at] == ",":
            at = _skip(text, at + 1)
    return spans


def pieces(body: bytes) -> list[bytes]:
    """`body` cut at its messages (module docstring); joined, the pieces are `body`."""
    try:
        text = body.decode("utf-8")
        spans = _message_spans(text)
    except (UnicodeDecodeError, ValueError, IndexError):
        return [body] if body else []
    if not spans:
        return [body] if body else []
    out, last = [], 0
    for start, end in spans:
        if start > last:
            out.append(text[last:start].encode("utf-8"))
        out.append(text[start:end].encode("utf-8"))
        last = end
    if last < len(text):
        out.append(text[last:].encode("utf-8"))
    return out


def store_all(datas: list[bytes], now) -> list[str]:
    """Store each of `datas` once under its hash (one already stored is only marked used now), in three
    statements whatever their number: the hashes already there, their use, the new ones. Returns the
    hashes in order. A body another transaction stores meanwhile (PostgreSQL) fails this store on the
    hash's uniqueness, as a second store of one body always did; the gateway sends the entry again."""
    digests = [sha256(data) for data in datas]
    wanted = dict(zip(digests, datas, strict=True))
    if not wanted:
        return digests
    stored = set(JournalBody.objects.filter(sha256__in=wanted).values_list("sha256", flat=True))
    if stored:
        JournalBody.objects.filter(sha256__in=stored).update(last_used_at=now)
    new = [JournalBody(sha256=digest, size=len(data), data=data, last_used_at=now)
           for digest, data in wanted.items() if digest not in stored]
    if new:
        JournalBody.objects.bulk_create(new)
    return digests


def read(hashes: list[str]) -> dict[str, JournalBody]:
    return {b.sha256: b for b in JournalBody.objects.filter(sha256__in=set(hashes))}


def joined(hashes: list[str], found: dict[str, JournalBody] | None = None) -> tuple[bytes, bool]:
    """The bytes the pieces name, and whether any was erased (its bytes gone, or a forgotten text cut)."""
    found = read(hashes) if found is None else found
    out, erased = [], False
    for digest in hashes:
        body = found.get(digest)
        if body is None or body.erased_at is not None:
            erased = True
        if body is not None:
            out.append(bytes(body.data))
    return b"".join(out), erased


__all__ = ["joined", "pieces", "read", "sha256", "store_all"]
