"""What a decoder would turn a response back into. The scrubber replaces the escape forms an echo
usually takes, but an upstream (or a box that controls one) can escape a secret character by character
in any mix (`\\u0072e&#97;l`, `&#x72;&#101;…`, `%72eal`) or send it as UTF-16: no list of forms covers
every mix. So after scrubbing, the response is also read the way a JSON / JavaScript parser, an HTML
parser, a URL decoder or a UTF-16 reader would read it, up to two layers deep, and a real value found in
any of those readings means the response is withheld (scrub.Unscrubbable).

Cost is bounded by the body limit: each reading is one pass, and a reading is only made when the text
holds the character that starts its escapes."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from urllib.parse import unquote

_JS_ESCAPE = re.compile(r"\\(u\{[0-9a-fA-F]{1,6}\}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|[0-7]{1,3}|.)", re.DOTALL)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


def _code_point(value: int) -> str:
    return chr(value) if value <= 0x10FFFF else "\ufffd"


def _js_one(match: re.Match) -> str:
    escape = match.group(1)
    if escape.startswith("u{"):
        return _code_point(int(escape[2:-1], 16))
    if escape[0] == "u" and len(escape) == 5:
        return chr(int(escape[1:], 16))
    if escape[0] == "x" and len(escape) == 3:
        return chr(int(escape[1:], 16))
    if escape.isdigit() and escape != "0":
        return _code_point(int(escape, 8))
    return _SIMPLE.get(escape, escape)


def js_unescape(text: str) -> str:
    """JSON and JavaScript string escapes (`\\uXXXX`, `\\u{X}`, `\\xXX`, octal, `\\/`, `\\n`, …)."""
    return _JS_ESCAPE.sub(_js_one, text)


_NUMERIC_ESCAPE = re.compile(r"&#(?:[xX]([0-9a-fA-F]{1,6})|([0-9]{1,7}));?|%([0-9a-fA-F]{2})")


def _numeric_one(match: re.Match) -> str:
    hex_ref, dec_ref, percent = match.groups()
    if percent is not None:
        return chr(int(percent, 16))
    return _code_point(int(hex_ref, 16) if hex_ref is not None else int(dec_ref))


def any_unescape(text: str) -> str:
    """Every character escape at once, in any mix: JS/JSON, numeric HTML references, percent bytes
    (as Latin-1 code points, which is what an ASCII secret needs)."""
    return _NUMERIC_ESCAPE.sub(_numeric_one, js_unescape(text))


# (the character that starts an escape, the decoder)
_READERS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("\\&%", any_unescape),  # JS/JSON, numeric HTML and percent escapes, in one pass and any mix
    ("&", html.unescape),  # named character references too
    ("+", lambda text: unquote(text.replace("+", " "), errors="surrogateescape")),
)


# Characters every reading keeps as themselves wherever they stand: no decoder above drops a character,
# and an escape that takes one of these in gives it back unchanged (`\"` reads `"`; a named reference
# `&amp"x` keeps what follows the entity, whose names are letters and digits; the numeric, percent and `+`
# readings never take them in). So, outside the UTF-16 readings (bytes with NUL), a reading of bytes cut
# just after one of these is the reading of the whole from that point, and a value that does not hold
# the character can never be read across it (streaming.py re-reads a stream's tail only from there).
SEPARATORS = "\"',:[]() \n<>"


# A byte that starts some reading's escape (or, NUL, the UTF-16 readings): without any, every reading is
# the text itself.
_ANY_ESCAPE = re.compile(rb"[\\&%+\x00]")


def read_as_is(data: bytes) -> bool:
    """Whether every reading of `data` is its text as it stands (no decoder would change it)."""
    return _ANY_ESCAPE.search(data) is None


def readings(data: bytes, depth: int = 2) -> Iterator[str]:
    """The text itself and every reading of it up to `depth` decoders deep (only decoders whose escape
    character occurs), plus the UTF-16 readings of a body holding NUL bytes."""
    texts = [data.decode("utf-8", "surrogateescape")]
    if b"\x00" in data:
        for encoding in ("utf-16-le", "utf-16-be"):
            for offset in (0, 1):
                texts.append(data[offset:].decode(encoding, "replace"))
    for text in texts:
        yield from _layers(text, depth)


def _layers(text: str, depth: int) -> Iterator[str]:
    yield text
    if depth == 0:
        return
    for markers, decode in _READERS:
        if any(marker in text for marker in markers):
            decoded = decode(text)
            if decoded != text:
                yield from _layers(decoded, depth - 1)
