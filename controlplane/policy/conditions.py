"""A grant's header conditions and body-size limit: compiled once, judged on the box's request headers as
the gateway forwards them (docs/grants.md, "Header and body-size conditions").

A condition is one header name (lower case) and one test: `present`, `absent`, `equals` a value, or
`matches` a pattern (the whole value; RE2 syntax, so matching time is linear in the value's length and a
pattern cannot stall the decision API). Which way a doubt falls depends on the grant's mode, so a
condition can only ever make a request less allowed:

- On an allow or ask grant a condition is a requirement. A header sent more than once must meet it on
  every line and on the lines joined by ", " (as a recipient may combine them); a value that is not known
  (masked in a stored approval) does not meet it; an unknown body size is over any limit.
- On a deny grant a condition selects what is denied. It holds when any line, or the joined value, meets
  it, and a value that is not known meets it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import re2

OPS = ("present", "absent", "equals", "matches")
VALUE_OPS = frozenset({"equals", "matches"})
MAX_CONDITIONS = 32
MAX_VALUE_CHARS = 1024
MAX_PATTERN_CHARS = 256
MAX_BODY_SIZE = 2**53
# RE2 refuses what it cannot run in linear time (backreferences, look-around) and bounds its own memory.
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.max_mem = 1 << 20


class ConditionError(ValueError):
    """A condition or limit that cannot be compiled; the message names what is wrong."""


@dataclass(frozen=True)
class HeaderCondition:
    name: str
    op: str
    value: str | None = None
    regex: object = field(default=None, compare=False, repr=False)

    def as_data(self) -> dict:
        """The stored and file form: {"name": ..., op: value} (`true` for present/absent)."""
        return {"name": self.name, self.op: self.value if self.op in VALUE_OPS else True}

    def describe(self) -> str:
        if self.op == "present":
            return f"header {self.name} is present"
        if self.op == "absent":
            return f"header {self.name} is absent"
        verb = "equals" if self.op == "equals" else "matches the pattern"
        return f"header {self.name} {verb} {self.value!r}"


def compile_pattern(pattern: str):
    if not isinstance(pattern, str) or not pattern:
        raise ConditionError("a pattern must be non-empty text")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ConditionError(f"a pattern is at most {MAX_PATTERN_CHARS} characters")
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        message = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ConditionError(f"pattern {pattern!r} does not compile: {message}") from None


def compile_condition(data) -> HeaderCondition:
    """One condition in stored form: {"name": "content-type", "equals": "application/json"} (or the same
    as (key, value) pairs)."""
    if isinstance(data, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in data):
        data = dict(data)
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str) or not data["name"]:
        raise ConditionError("a header condition needs a header name")
    ops = [op for op in OPS if op in data]
    if len(ops) != 1 or set(data) != {"name", ops[0]}:
        raise ConditionError(f"header condition on {data.get('name')!r} needs exactly one of "
                             f"{', '.join(OPS)} and nothing else")
    name, op, value = data["name"], ops[0], data[ops[0]]
    if name != name.lower():
        raise ConditionError(f"header name {name!r} must be lower case")
    if op in VALUE_OPS:
        if not isinstance(value, str) or len(value) > MAX_VALUE_CHARS:
            raise ConditionError(f"header {name}: {op} needs text of at most {MAX_VALUE_CHARS} characters")
        return HeaderCondition(name, op, value, compile_pattern(value) if op == "matches" else None)
    if value is not True:
        raise ConditionError(f"header {name}: {op} must be true")
    return HeaderCondition(name, op)


def compile_conditions(raw: Iterable) -> tuple[HeaderCondition, ...]:
    items = tuple(raw or ())
    if len(items) > MAX_CONDITIONS:
        raise ConditionError(f"a grant has at most {MAX_CONDITIONS} header conditions")
    compiled = tuple(compile_condition(item) for item in items)
    names = [c.name for c in compiled]
    if len(set(names)) != len(names):
        raise ConditionError("one condition per header name (put alternatives into one pattern)")
    return compiled


def check_max_body_size(value, *, wall: bool) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_BODY_SIZE:
        raise ConditionError(f"max_body_size {value!r} must be a whole number of bytes, 0 to 2^53")
    if wall:
        raise ConditionError("a deny grant covers every body size; max_body_size is for allow and ask grants")
    return value


def header_index(headers: Iterable) -> dict[str, tuple[str | None, ...]]:
    """Request headers by lower-cased name, every line kept in order (None: a value not known)."""
    index: dict[str, list[str | None]] = {}
    for name, value in headers or ():
        index.setdefault(str(name).lower(), []).append(value if isinstance(value, str) else None)
    return {name: tuple(values) for name, values in index.items()}


class LazyHeaderIndex:
    """`header_index` built on first use: a policy without conditions never pays for it."""

    __slots__ = ("_index", "_lines")

    def __init__(self, lines: Iterable) -> None:
        self._lines = lines
        self._index: dict[str, tuple[str | None, ...]] | None = None

    def get(self, name: str, default=()) -> tuple[str | None, ...]:
        if self._index is None:
            self._index = header_index(self._lines)
        return self._index.get(name, default)


def _value_holds(condition: HeaderCondition, value: str, wall: bool) -> bool:
    if condition.op == "equals":
        return value == condition.value
    try:
        return condition.regex.fullmatch(value) is not None
    except UnicodeEncodeError:  # bytes that are not UTF-8 (kept as surrogates): a value not known
        return wall


def _holds(condition: HeaderCondition, values: tuple[str | None, ...], *, wall: bool) -> bool:
    if condition.op == "present":
        return bool(values)
    if condition.op == "absent":
        return not values
    if not values:
        return False
    if any(v is None for v in values):
        return wall  # a value not known: a deny holds, an allow is not met
    readings = values if len(values) == 1 else (*values, ", ".join(values))
    if wall:
        return any(_value_holds(condition, v, wall) for v in readings)
    return all(_value_holds(condition, v, wall) for v in readings)


def failure(conditions: tuple[HeaderCondition, ...], max_body_size: int | None, *, wall: bool,
            headers: Mapping[str, tuple[str | None, ...]] | LazyHeaderIndex,
            body_size: int | None) -> str | None:
    """None when the request meets every condition; otherwise which one it does not meet, in words that
    never quote a request's value (they reach the box and the audit record)."""
    if max_body_size is not None and (body_size is None or body_size > max_body_size):
        size = "of unknown size" if body_size is None else f"of {body_size} bytes"
        return f"a body {size} is over its max_body_size of {max_body_size} bytes"
    for condition in conditions:
        if not _holds(condition, headers.get(condition.name, ()), wall=wall):
            return f"the request does not meet its condition: {condition.describe()}"
    return None
