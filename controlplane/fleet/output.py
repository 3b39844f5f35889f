"""A run's stored output, read with its sources: `Run.output` is the text in arrival order and
`Run.output_sources` ([[source, characters], ...]) says which consecutive parts of it the box wrote to
stdout and which to stderr (captured by controlplane.dispatch.boxoutput)."""

from __future__ import annotations

from collections.abc import Iterable

STDOUT, STDERR = "stdout", "stderr"
UNKNOWN = "output"  # a run stored before sources were kept: one chunk of unknown source
SOURCES = (STDOUT, STDERR)


def output_pieces(output: str, sources) -> list[tuple[str, str]]:
    """A stored run's output as (source, text) in arrival order. A run stored before sources were kept
    (or whose sources do not add up to its output) is one chunk of unknown source, never a guess."""
    if not isinstance(sources, list) or not all(
            isinstance(item, list) and len(item) == 2 and item[0] in SOURCES
            and isinstance(item[1], int) and item[1] > 0 for item in sources) \
            or sum(item[1] for item in sources) != len(output):
        return [(UNKNOWN, output)] if output else []
    pieces, at = [], 0
    for source, length in sources:
        pieces.append((source, output[at:at + length]))
        at += length
    return pieces


def stdout_text(pieces: Iterable[tuple[str, str]]) -> str:
    """What the box wrote to stdout (or of unknown source), without what it wrote to stderr: where a
    run's answer is read from, so a stderr line can never split or pose as the answer."""
    return "".join(text for source, text in pieces if source != STDERR)


def preview_pieces(pieces: Iterable[tuple[str, str]], limit: int) -> list[tuple[str, str]]:
    """The first `limit` characters of the pieces, sources kept."""
    out, left = [], limit
    for source, text in pieces:
        if left <= 0:
            break
        out.append((source, text[:left]))
        left -= len(text)
    return out
