"""The decide answer's `wire` (docs/wire.md): the schema admits exactly the grant's wire formats."""

from __future__ import annotations

import typing

from controlplane.egress.schemas import DecideOut
from controlplane.policy.models import Grant


def test_the_answers_wire_values_are_the_grants():
    annotation = DecideOut.model_fields["wire"].annotation
    literal = next(a for a in typing.get_args(annotation) if a is not type(None))
    assert set(typing.get_args(literal)) == {w.value for w in Grant.Wire if w.value}
