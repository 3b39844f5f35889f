"""Whether one grant matches one (already normalised) request, and how specifically.

The pattern language and the precedence built on `Specificity` are documented in docs/grants.md.
Grant fields are compiled once (`compile_match`) so that matching hundreds of grants stays cheap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from controlplane.policy import conditions
from controlplane.policy.normalize import DEFAULT_PORTS, NormalizationError, normalize_host, normalize_path

HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
GRANT_SCHEMES = frozenset({"http", "https"})
DEFAULT_GRANT_SCHEMES = ("https",)
# JSON-RPC messages that carry no tool and only set up a session; allowed under a grant that lists tools.
MCP_SESSION_METHODS = frozenset({"initialize", "notifications/initialized", "ping", "tools/list"})
MCP_TOOL_CALL = "tools/call"
TOOL_RE = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")


# Request headers by lower-case name (conditions.header_index, or its lazy form).
HeaderLookup = Mapping[str, tuple[str | None, ...]] | conditions.LazyHeaderIndex


class PatternError(ValueError):
    """A grant field that cannot be compiled; the message names what is wrong."""


@dataclass(frozen=True, order=True)
class Specificity:
    """Compared field by field, in this order; larger is more specific (docs/grants.md)."""

    host_exact: int
    wildcard_labels: int
    port_explicit: int
    path_literal_chars: int
    path_exact: int
    methods_listed: int
    worker_specific: int
    mcp_tools_listed: int
    conditions_listed: int = 0  # header conditions and a body-size limit, counted


@dataclass(frozen=True)
class PathPattern:
    pattern: str
    regex: re.Pattern
    literal_chars: int
    exact: bool


@dataclass(frozen=True)
class CompiledMatch:
    worker_id: int | None
    host: str
    wildcard: bool
    port: int | None
    schemes: frozenset[str]
    methods: frozenset[str]
    paths: tuple[PathPattern, ...]
    mcp_tools: frozenset[str]
    tunnel: bool
    # A deny grant is a wall (docs/grants.md): without a port it covers every port of its host, and
    # without schemes every scheme, tunnels included.
    any_port: bool = False
    any_scheme: bool = False
    # Judged on the box's headers and body size (controlplane.policy.conditions); a deny's are `wall`.
    conditions: tuple[conditions.HeaderCondition, ...] = ()
    max_body_size: int | None = None
    wall: bool = False


def parse_host_pattern(pattern: str) -> tuple[str, bool]:
    """("example.com", False) for an exact host, ("example.com", True) for "*.example.com"."""
    if not isinstance(pattern, str) or not pattern:
        raise PatternError("host is empty")
    wildcard = pattern.startswith("*.")
    rest = pattern[2:] if wildcard else pattern
    if "*" in rest:
        raise PatternError(f"host {pattern!r}: '*' is only allowed as a leading '*.' label")
    try:
        host = normalize_host(rest)
    except NormalizationError as exc:
        raise PatternError(str(exc)) from exc
    if host.endswith(".") or pattern.endswith("."):
        raise PatternError(f"host {pattern!r} must not end with a dot")
    if host != rest:
        canonical = ("*." if wildcard else "") + host
        raise PatternError(f"host {pattern!r} is not in canonical form; write {canonical!r}")
    if wildcard and (host.startswith("[") or "." not in host or host.replace(".", "").isdigit()):
        raise PatternError(f"host {pattern!r}: a wildcard needs a domain with at least two labels")
    return host, wildcard


def compile_path_pattern(pattern: str) -> PathPattern:
    if not isinstance(pattern, str) or not pattern.startswith("/"):
        raise PatternError(f"path pattern {pattern!r} must start with '/'")
    if "?" in pattern or "#" in pattern:
        raise PatternError(f"path pattern {pattern!r} must not contain a query or fragment")
    deep = pattern.endswith("/**")
    body = pattern[:-3] if deep else pattern
    if "**" in body:
        raise PatternError(f"path pattern {pattern!r}: '**' is only allowed as a trailing '/**'")
    try:
        canonical = normalize_path(body or "/")
    except NormalizationError as exc:
        raise PatternError(f"path pattern {pattern!r}: {exc}") from exc
    if canonical != (body or "/"):
        raise PatternError(f"path pattern {pattern!r} is not in canonical form; write {canonical!r}")
    parts = [re.escape(piece) for piece in body.split("*")]
    regex = "[^/]*".join(parts)
    if deep:
        regex = regex + "(?:/.*)?" if body else "/.*"
    literal = len(body.replace("*", ""))
    return PathPattern(pattern, re.compile(regex, re.DOTALL), literal, exact=not deep and "*" not in body)


def compile_match(*, worker_id, host, port, schemes, methods, paths, mcp_tools, tunnel,
                  wall: bool = False, header_conditions=(), max_body_size=None) -> CompiledMatch:
    """`wall`: the grant denies; its absent port and schemes mean every port and scheme."""
    canonical_host, wildcard = parse_host_pattern(host)
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535):
        raise PatternError(f"port {port!r} is out of range 1-65535")
    bad_schemes = [s for s in schemes if s not in GRANT_SCHEMES]
    if bad_schemes:
        raise PatternError(f"unknown scheme {bad_schemes[0]!r}; expected http or https")
    bad_methods = [m for m in methods if m not in HTTP_METHODS]
    if bad_methods:
        known = ", ".join(sorted(HTTP_METHODS))
        raise PatternError(f"unknown method {bad_methods[0]!r}; expected one of {known}")
    bad_tools = [t for t in mcp_tools if not isinstance(t, str) or not TOOL_RE.match(t)]
    if bad_tools:
        raise PatternError(f"MCP tool name {bad_tools[0]!r} is not valid")
    try:
        compiled_conditions = conditions.compile_conditions(header_conditions)
        limit = conditions.check_max_body_size(max_body_size, wall=wall)
    except conditions.ConditionError as exc:
        raise PatternError(str(exc)) from None
    if tunnel and (compiled_conditions or limit is not None):
        raise PatternError("a tunnel grant is judged on host and port only; it cannot have header "
                           "conditions or max_body_size")
    return CompiledMatch(
        worker_id=worker_id, host=canonical_host, wildcard=wildcard, port=port,
        schemes=frozenset(schemes or DEFAULT_GRANT_SCHEMES), methods=frozenset(methods),
        paths=tuple(compile_path_pattern(p) for p in paths), mcp_tools=frozenset(mcp_tools), tunnel=tunnel,
        any_port=wall and port is None, any_scheme=wall and not schemes and not tunnel,
        conditions=compiled_conditions, max_body_size=limit, wall=wall,
    )


def match(
    compiled: CompiledMatch, *, worker_id, method: str, scheme: str, host: str, port: int, path: str,
    mcp: tuple, headers: HeaderLookup | None = None, body_size: int | None = None,
    judge_conditions: bool = True,
) -> Specificity | None:
    """None when the grant does not apply; otherwise how specifically it applies.
    `host` and `path` must already be normalised, `port` explicit; `headers` as conditions.header_index
    gives them (absent: no headers), `body_size` None when not known. Without `judge_conditions`, what
    the request is aimed at (`match_target`)."""
    if compiled.worker_id is not None and compiled.worker_id != worker_id:
        return None
    # Host first: it is what rules out most grants, and it is a string comparison.
    if not covers_host(compiled, host):
        return None
    if compiled.tunnel:
        if scheme != "tunnel" or method != "CONNECT":
            return None
    elif scheme not in compiled.schemes and not compiled.any_scheme:
        return None
    if not compiled.any_port:
        expected_port = compiled.port if compiled.port is not None else DEFAULT_PORTS[scheme]
        if port != expected_port:
            return None
    if compiled.any_scheme and scheme == "tunnel":
        # A tunnel hides method, path, tools and headers: a deny that could apply inside it covers it.
        return _specificity(compiled, None)
    if compiled.methods and method not in compiled.methods:
        return None
    best_path = None
    if compiled.paths and not compiled.tunnel:
        matching = [p for p in compiled.paths if p.regex.fullmatch(path)]
        if not matching:
            return None
        best_path = max(matching, key=lambda p: (p.literal_chars, p.exact))
    if compiled.mcp_tools and not _mcp_allowed(compiled.mcp_tools, mcp):
        return None
    if judge_conditions and (compiled.conditions or compiled.max_body_size is not None) and unmet_condition(
            compiled, headers=headers, body_size=body_size) is not None:
        return None
    return _specificity(compiled, best_path)


def covers_host(compiled: CompiledMatch, host: str) -> bool:
    """Whether the grant's host pattern names `host` (normalised): itself, or under a wildcard's domain."""
    return host.endswith("." + compiled.host) if compiled.wildcard else host == compiled.host


def match_target(compiled: CompiledMatch, **request) -> Specificity | None:
    """`match` without the header conditions and body-size limit: what the request is aimed at."""
    return match(compiled, **request, judge_conditions=False)


def unmet_condition(compiled: CompiledMatch, *, headers: HeaderLookup | None,
                    body_size: int | None) -> str | None:
    """Which of the grant's header conditions or body-size limit the request does not meet, or None."""
    return conditions.failure(compiled.conditions, compiled.max_body_size, wall=compiled.wall,
                              headers=headers or {}, body_size=body_size)


def _specificity(compiled: CompiledMatch, best_path: PathPattern | None) -> Specificity:
    return Specificity(
        host_exact=0 if compiled.wildcard else 1,
        wildcard_labels=compiled.host.count(".") + 1 if compiled.wildcard else 0,
        port_explicit=1 if compiled.port is not None else 0,
        path_literal_chars=best_path.literal_chars if best_path else -1,
        path_exact=1 if best_path and best_path.exact else 0,
        methods_listed=1 if compiled.methods else 0,
        worker_specific=1 if compiled.worker_id is not None else 0,
        mcp_tools_listed=1 if compiled.mcp_tools else 0,
        conditions_listed=len(compiled.conditions) + (compiled.max_body_size is not None),
    )


def _mcp_allowed(tools: frozenset[str], mcp: tuple) -> bool:
    """A grant listing tools covers only MCP traffic: every tools/call names a listed tool, every other
    message is session set-up. A request with no MCP messages does not match it."""
    if not mcp:
        return False
    for call in mcp:
        if call.method == MCP_TOOL_CALL:
            if call.tool not in tools:
                return False
        elif call.method not in MCP_SESSION_METHODS or call.tool is not None:
            return False
    return True
