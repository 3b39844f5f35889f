"""The gateway's canonical-path check (gateway/roster_gateway/canonical.py, standard library only, loaded
here from its file: the gateway is its own zone) and the control plane's normaliser agree on every path
made of the characters path tricks are made of, not only on the shared table's cases: the gateway forwards
a path only when it equals the form the control plane judged, so one disagreement is a bypass."""

from __future__ import annotations

import importlib.util

from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.policy.normalize import NormalizationError, normalize_path
from tests.support import procs

_spec = importlib.util.spec_from_file_location(
    "gateway_canonical", procs.REPO / "gateway" / "roster_gateway" / "canonical.py")
gateway_canonical = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gateway_canonical)

# Dots, escapes (of '.', ';', '%', '/', 'A'), parameters and a plain letter, in segments.
PIECES = [".", "..", "%2e", "%2E", "%3b", "%3B", "%25", "%253B", "%252e", "%2F", ";", ";x=1", "a", "%41", "=",
          "/"]


def _judged(path: str) -> str | None:
    try:
        return normalize_path(path)
    except NormalizationError:
        return None


def _gateway(path: str) -> str | None:
    try:
        return gateway_canonical.canonical_path(path)
    except gateway_canonical.Unreadable:
        return None


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=10))
def test_both_sides_agree(pieces):
    path = "/public/" + "".join(pieces)
    assert _gateway(path) == _judged(path), path


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=10))
def test_no_path_the_gateway_forwards_reads_as_a_dot_segment_to_a_decoding_server(pieces):
    """What the gateway forwards as sent (its canonical form) holds no segment that a server decoding it
    repeatedly and stripping ';' parameters reads as '.' or '..'."""
    path = "/public/" + "".join(pieces)
    forwarded = _gateway(path)
    if forwarded != path:
        return  # refused by the gateway (400) or denied by the control plane
    for segment in forwarded.split("/")[1:]:
        decoded = segment
        for _ in range(10):
            decoded = gateway_canonical._ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), decoded)
        assert decoded.split(";", 1)[0] not in (".", ".."), (path, segment)
