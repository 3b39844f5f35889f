"""chain.body_with_data: the bytes audit_append stores are build_body's, though the data is serialised
once before the chain head lock and the rest is filled into a template inside it."""

import datetime as dt
import random
import string

import pytest

from controlplane.audit import chain

# Quotes, backslashes, control characters, non-ASCII and astral characters: what escaping must agree on.
_ALPHABET = string.printable + '"\\\x00\x1f\x7fé☃\u2028𝄞'


def _text(rng: random.Random, limit: int = 20) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(limit)))


def _value(rng: random.Random, depth: int = 0):
    choice = rng.randrange(7 if depth < 3 else 5)
    if choice == 0:
        return _text(rng)
    if choice == 1:
        return rng.randrange(-10**12, 10**12)
    if choice == 2:
        return rng.choice([None, True, False])
    if choice == 3:
        return rng.random() * 1000
    if choice == 4:
        return dt.datetime(2026, 1, 2, 3, 4, 5, rng.randrange(10**6), tzinfo=dt.UTC)
    if choice == 5:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {_text(rng, 8): _value(rng, depth + 1) for _ in range(rng.randrange(5))}


@pytest.mark.parametrize("seed", range(200))
def test_body_with_data_equals_build_body(seed):
    rng = random.Random(seed)
    fields = {"seq": rng.randrange(1, 10**15), "prev": _text(rng, 70), "kind": _text(rng),
              "run": rng.choice([None, rng.randrange(10**12)]), "worker": _text(rng), "verdict": _text(rng),
              "reason": _text(rng),
              "time": dt.datetime(2026, 9, 17, 8, 5, 0, rng.randrange(10**6), tzinfo=dt.UTC)}
    data = {_text(rng, 8): _value(rng) for _ in range(rng.randrange(6))}
    expected = chain.build_body(**fields, data=data)
    assert chain.body_with_data(**fields, data_json=chain.canonical_json(data)) == expected
    expected.encode("ascii")


def test_a_time_in_another_zone_is_written_in_utc_by_both():
    moment = dt.datetime(2026, 1, 1, 1, 0, 0, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    fields = {"seq": 1, "time": moment, "prev": chain.GENESIS_PREV, "kind": "decision", "run": 7,
              "worker": "w", "verdict": "allow", "reason": ""}
    body = chain.body_with_data(**fields, data_json="{}")
    assert body == chain.build_body(**fields, data={})
    assert '"time":"2025-12-31T23:00:00.123Z"' in body
