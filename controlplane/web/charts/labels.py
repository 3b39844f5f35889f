"""Words and colours the pictures share: unit names as people read them, cap windows as periods."""

from __future__ import annotations

from controlplane.ledger.models import Unit

UNIT_WORDS = {value: label.lower() for value, label in Unit.choices}
PERIODS = {"day": "today (UTC)", "month": "this month (UTC)", "all": "in all"}
COLOURS = ["#1d4ed8", "#b45309", "#047857", "#7c3aed", "#be123c", "#0e7490"]
VERDICT_COLOURS = {"allow": "#047857", "deny": "#b91c1c", "ask": "#b45309"}
OUTCOME_COLOURS = {"approved": "#047857", "refused": "#b91c1c", "expired": "#b45309",
                   "abandoned": "#6b7280", "waiting": "#1d4ed8"}
NET, RESERVED = "#1d4ed8", "#b45309"


def unit_words(unit: str) -> str:
    return UNIT_WORDS.get(unit, unit)


def amount(value: float, unit: str) -> str:
    words = unit_words(unit)
    if int(value) == 1 and words.endswith("s"):
        words = words[:-1]  # "1 request", "1 model token"; "micro-currency" stays
    return f"{int(value):,} {words}"


def scope_words(scope: str) -> str:
    return "org-wide" if scope == "org" else scope.removeprefix("worker:")
