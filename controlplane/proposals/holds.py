"""Tripwires other apps add (a lower app never imports a higher one): a check that, when it finds
something, holds a proposal for a person whatever an earned-trust rule says. Knowledge registers the
participant scan for knowledge changes and worker notes (docs/knowledge.md). A hold is hygiene, not a
wall: a person still decides, with the hits shown on the card."""

from __future__ import annotations

from collections.abc import Callable

HOLDS: dict[str, list[Callable[[object], list[dict]]]] = {}


def register_hold(kind: str, check: Callable[[object], list[dict]]) -> None:
    checks = HOLDS.setdefault(kind, [])
    if check not in checks:
        checks.append(check)


def hold_hits(proposal) -> list[dict]:
    return [hit for check in HOLDS.get(proposal.kind, []) for hit in check(proposal)]
