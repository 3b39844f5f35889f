"""The control plane's path normaliser agrees with the gateway's canonical-form check through one shared
table (tests/contract/canonical/paths.json): the gateway forwards a path only when it equals the form
judged here, so the two must never disagree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controlplane.policy.normalize import NormalizationError, normalize_path

TABLE = json.loads((Path(__file__).resolve().parents[1] / "contract" / "canonical" / "paths.json")
                   .read_text())["cases"]


@pytest.mark.parametrize("raw,canonical", TABLE, ids=[c[0] or "empty" for c in TABLE])
def test_normalize_path_agrees_with_the_shared_table(raw, canonical):
    if canonical is None:
        with pytest.raises(NormalizationError):
            normalize_path(raw)
    else:
        assert normalize_path(raw) == canonical
