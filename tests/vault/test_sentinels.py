from __future__ import annotations

import re
import zlib

import pytest

from controlplane.vault import sentinels
from controlplane.vault.models import Secret

SHAPES = {
    "openai": r"sk-proj-[A-Za-z0-9_-]{48}",
    "anthropic": r"sk-ant-api03-[A-Za-z0-9_-]{93}AA",
    "gemini": r"AIza[A-Za-z0-9_-]{35}",
    "github": r"ghp_[A-Za-z0-9]{36}",
    "slack": r"xoxb-\d{12}-\d{13}-[A-Za-z0-9]{24}",
    "aws": r"AKIA[A-Z2-7]{16}",
    "generic": r"roster-sentinel-[A-Za-z0-9]{32}",
}


def test_every_kind_has_a_shape():
    assert set(SHAPES) == set(Secret.Kind.values) == set(sentinels.GENERATORS)


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_shape_length_and_uniqueness(kind):
    made = {sentinels.make_sentinel(kind) for _ in range(200)}
    assert len(made) == 200
    for s in made:
        assert re.fullmatch(SHAPES[kind], s), s
        assert len(s) <= Secret._meta.get_field("sentinel").max_length


def test_github_sentinel_carries_a_valid_checksum():
    token = sentinels.github()
    body, check = token[4:34], token[34:]
    assert sentinels._base62(zlib.crc32(body.encode()), 6) == check


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown secret kind"):
        sentinels.make_sentinel("ssh")
