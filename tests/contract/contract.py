"""Loading the wire fixtures and comparing a live answer with one (exact, except `variable` paths, whose
JSON type must still match)."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
TOKEN = "rt_EXAMPLEtokenEXAMPLEtokenEXAMPLEtokenEXAMPL"
SENTINEL = "sk-proj-EXAMPLEsentinelEXAMPLEsentinelEXAMPLEsentinel"
DECISION_ID = "dc_EXAMPLEdecisionId0"
APPROVAL_ID = "7d3f5a2e-4b1c-4e8a-9f60-2a1b3c4d5e6f"


def load(name: str, **substitutions: str) -> dict:
    text = (HERE / f"{name}.json").read_text()
    for placeholder, value in substitutions.items():
        text = text.replace(placeholder, value)
    return json.loads(text)


# Tables shared by both sides, not exchanges: deny_reasons.json (reason -> the box's HTTP status).
TABLES = frozenset({"deny_reasons"})


def names(prefix: str = "") -> list[str]:
    """The exchange fixtures (not the TABLES)."""
    return sorted(p.stem for p in HERE.glob(f"{prefix}*.json") if p.stem not in TABLES)


def _kind(value) -> str:
    if value is None:
        return "null"
    kinds = {bool: "bool", int: "int", str: "str", list: "list", dict: "dict"}
    return kinds.get(type(value), type(value).__name__)


def mismatches(expected, actual, variable: frozenset[str], path: str = "response") -> list[str]:
    if path in variable:
        if expected is not None and _kind(expected) != _kind(actual):
            return [f"{path}: type {_kind(actual)}, expected {_kind(expected)}"]
        return []
    if isinstance(expected, dict) and isinstance(actual, dict):
        if set(expected) != set(actual):
            return [f"{path}: keys {sorted(actual)} != {sorted(expected)}"]
        return [m for key in expected
                for m in mismatches(expected[key], actual[key], variable, f"{path}.{key}")]
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [m for i, (e, a) in enumerate(zip(expected, actual, strict=True))
                for m in mismatches(e, a, variable, f"{path}[{i}]")]
    if _kind(expected) != _kind(actual) or expected != actual:
        return [f"{path}: {actual!r} != {expected!r}"]
    return []
