"""The example requests of a grant's preview (controlplane.policy.preview): the hosts a grant does and does
not match, and headers that meet its header conditions, so the preview's ✓ rows are requests the grant
really allows (issue 27.3: with no headers every example of a conditioned grant showed ✗).

A `matches` condition is met by the shortest value its pattern's structure suggests (Python's own regex
parser reads the pattern; RE2 then judges the value, as the engine does), and left out when that value
does not match: the preview then says a request without the header is what it shows."""

from __future__ import annotations

import ipaddress
import re._constants as sre_c
import re._parser as sre_parse

from controlplane.policy.conditions import HeaderCondition

_MAX_EXAMPLE_CHARS = 200


def neighbour_addresses(host: str) -> list[str]:
    """Addresses next to an IP literal (the grant's own form: `10.0.0.7`, `[::1]`), for a "not matched"
    example that is a real address rather than an invented name like www.10.0.0.7."""
    ip = ipaddress.ip_address(host.strip("[]"))
    top = 2**32 - 1 if ip.version == 4 else 2**128 - 1
    out = []
    for value in (int(ip) + 1, int(ip) - 1):
        if 0 <= value <= top:
            near = type(ip)(value)  # same family: ip_address(2) would be 0.0.0.2
            out.append(f"[{near.compressed}]" if ip.version == 6 else str(near))
    return out


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def example_hosts(host: str, wildcard: bool) -> list[str]:
    """The grant's host first (when it can be a request's host), then hosts it must not match."""
    if wildcard:
        return [f"api.{host}", f"a.b.{host}", host, f"{host}.evil.example"]
    if is_ip_literal(host):
        return [host, *neighbour_addresses(host)]
    return [host, f"www.{host}", f"{host}.evil.example"]


def _build(items, depth: int = 0) -> str | None:
    """The shortest string the parsed pattern suggests; None for what has no obvious example."""
    if depth > 20:
        return None
    out: list[str] = []
    for op, arg in items:
        if op is sre_c.LITERAL:
            out.append(chr(arg))
        elif op is sre_c.ANY:
            out.append("x")
        elif op is sre_c.NOT_LITERAL:  # [^,]
            out.append("x" if arg != ord("x") else "y")
        elif op is sre_c.IN:
            piece = _in_example(arg)
            if piece is None:
                return None
            out.append(piece)
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
            low, _high, sub = arg
            piece = _build(sub, depth + 1)
            if piece is None:
                return None
            out.append(piece * max(low, 1 if _high else 0))
        elif op is sre_c.SUBPATTERN:
            piece = _build(arg[-1], depth + 1)
            if piece is None:
                return None
            out.append(piece)
        elif op is sre_c.BRANCH:
            piece = _build(arg[1][0], depth + 1)
            if piece is None:
                return None
            out.append(piece)
        elif op is sre_c.AT:
            continue
        else:
            return None
    return "".join(out)


def _in_example(items) -> str | None:
    for op, arg in items:
        if op is sre_c.NEGATE:
            return "x" if all(not (o is sre_c.LITERAL and a == ord("x")) for o, a in items) else "y"
        if op is sre_c.LITERAL:
            return chr(arg)
        if op is sre_c.RANGE:
            return chr(arg[0])
        if op is sre_c.CATEGORY:
            return {sre_c.CATEGORY_DIGIT: "0", sre_c.CATEGORY_WORD: "a",
                    sre_c.CATEGORY_SPACE: " "}.get(arg, "x")
    return None


def matching_value(condition: HeaderCondition) -> str | None:
    """A value that meets a `matches` condition, judged by the condition's own RE2 pattern."""
    try:
        value = _build(sre_parse.parse(condition.value))
    except Exception:  # noqa: BLE001 - RE2 syntax Python cannot parse: no example, the preview says so
        return None
    if value is None or len(value) > _MAX_EXAMPLE_CHARS or condition.regex.fullmatch(value) is None:
        return None
    return value


def example_headers(conditions: tuple[HeaderCondition, ...]) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """Headers meeting the conditions (as conditions.header_index gives them), and the names of the
    headers no example value could be found for (the preview says those requests lack them)."""
    out: dict[str, tuple[str, ...]] = {}
    missing: list[str] = []
    for condition in conditions:
        if condition.op == "present":
            out[condition.name] = ("x",)
        elif condition.op == "equals":
            out[condition.name] = (condition.value,)
        elif condition.op == "matches":
            value = matching_value(condition)
            if value is None:
                missing.append(condition.name)
            else:
                out[condition.name] = (value,)
    return out, missing
