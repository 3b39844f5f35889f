"""The policy engine: a pure function from (run state, request facts, grants) to a Decision.

The engine is the sole producer of decisions: it alone imports controlplane.policy.decision, where a
Decision is minted (pyproject's import contracts), and everyone else gets one through `evaluate`,
`deny` or `allow_approved`, and checks it with `require_authentic`. Precedence and the pattern
language are documented in docs/grants.md.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from controlplane.core.taint import DataClass
from controlplane.policy import conditions, matching
from controlplane.policy.decision import Decision, DenyReason, Verdict
from controlplane.policy.decision import is_authentic as is_authentic  # re-exported: the engine's API
from controlplane.policy.decision import mint as _mint
from controlplane.policy.decision import require_authentic as require_authentic  # re-exported
from controlplane.policy.normalize import NormalizationError, normalize_host, normalize_path, normalize_port


class Mode(enum.StrEnum):
    AUTO = "auto"
    ASK = "ask"
    DENY = "deny"


# Ties between equally specific grants go to the stricter mode.
_STRICTNESS = {Mode.DENY: 2, Mode.ASK: 1, Mode.AUTO: 0}


@dataclass(frozen=True)
class RunState:
    run_id: int
    worker_id: int
    taint: DataClass
    untrusted: bool


@dataclass(frozen=True)
class McpCall:
    method: str
    tool: str | None


@dataclass(frozen=True)
class RequestFacts:
    method: str
    scheme: str
    host: str
    port: int | None
    path: str
    mcp: tuple[McpCall, ...] = ()
    sentinel_secret_ids: frozenset[int] = frozenset()
    # The box's request headers as the gateway forwards them, every line as (name, value); a value of
    # None is not known (masked in a stored approval). Injected credentials are never among them.
    headers: tuple[tuple[str, str | None], ...] = ()
    body_size: int | None = None  # bytes forwarded; None: not known (over any grant's max_body_size)


@dataclass(frozen=True)
class GrantRule:
    """An immutable snapshot of a Grant. Construction compiles the match fields; a grant that does not
    compile keeps the error in `broken`, and evaluating against it denies everything (broken config)."""

    slug: str
    host: str
    mode: Mode = Mode.AUTO
    id: int | None = None
    worker_id: int | None = None
    methods: tuple[str, ...] = ()
    schemes: tuple[str, ...] = ()
    port: int | None = None
    paths: tuple[str, ...] = ()
    mcp_tools: tuple[str, ...] = ()
    max_taint: DataClass = DataClass.PRIVATE
    result_class: DataClass = DataClass.PRIVATE
    untrusted: bool = True
    expires_at: datetime | None = None
    secret_id: int | None = None
    secret_name: str | None = None
    inject_header: str = ""
    inject_format: str = "{secret}"
    cost_per_call: int = 0
    tunnel: bool = False
    trace: bool = False
    enabled: bool = True
    header_conditions: tuple = ()  # stored form, controlplane.policy.conditions
    max_body_size: int | None = None
    compiled: matching.CompiledMatch | None = field(default=None, compare=False, repr=False)
    broken: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", Mode(self.mode))
        object.__setattr__(self, "max_taint", DataClass(self.max_taint))
        object.__setattr__(self, "result_class", DataClass(self.result_class))
        for name in ("methods", "schemes", "paths", "mcp_tools"):
            object.__setattr__(self, name, tuple(getattr(self, name) or ()))
        # Hashable, frozen copies ((key, value) pairs per condition): a snapshot never changes under the
        # policy cache; anything else is left as it is, for the compiler to call broken.
        raw = self.header_conditions
        if isinstance(raw, list | tuple):
            raw = tuple(tuple(c.items()) if isinstance(c, dict) else c for c in raw)
        object.__setattr__(self, "header_conditions", raw)
        try:
            compiled = matching.compile_match(
                worker_id=self.worker_id, host=self.host, port=self.port, schemes=self.schemes,
                methods=self.methods, paths=self.paths, mcp_tools=self.mcp_tools, tunnel=self.tunnel,
                wall=self.mode == Mode.DENY, header_conditions=self.header_conditions,
                max_body_size=self.max_body_size,
            )
            object.__setattr__(self, "compiled", compiled)
            object.__setattr__(self, "broken", "")
        except (matching.PatternError, TypeError, ValueError) as exc:
            object.__setattr__(self, "compiled", None)
            object.__setattr__(self, "broken", f"grant {self.slug!r}: {exc}")

    @classmethod
    def from_model(cls, grant) -> GrantRule:
        secret = grant.secret if grant.secret_id else None
        return cls(
            id=grant.pk, slug=grant.slug, worker_id=grant.worker_id, methods=tuple(grant.methods or ()),
            schemes=tuple(grant.schemes or ()), host=grant.host, port=grant.port,
            paths=tuple(grant.paths or ()), mcp_tools=tuple(grant.mcp_tools or ()), mode=grant.mode,
            max_taint=grant.max_taint, result_class=grant.result_class, untrusted=grant.untrusted,
            expires_at=grant.expires_at, secret_id=grant.secret_id,
            secret_name=secret.name if secret is not None else None, inject_header=grant.inject_header,
            inject_format=grant.inject_format, cost_per_call=grant.cost_per_call, tunnel=grant.tunnel,
            trace=grant.trace, enabled=grant.enabled,
            header_conditions=tuple(grant.header_conditions or ()), max_body_size=grant.max_body_size,
        )


def deny(reason: DenyReason, message: str) -> Decision:
    return _mint(Verdict.DENY, DenyReason(reason), None, message)


def allow_approved(grant: GrantRule, message: str) -> Decision:
    """An allow for a request a human approved (the approval service has checked the approval)."""
    if not isinstance(grant, GrantRule):
        raise TypeError("allow_approved needs a GrantRule")
    return _mint(Verdict.ALLOW, None, grant, message)


def taint_after(run: RunState, grant: GrantRule) -> tuple[DataClass, bool]:
    """A result raises taint to the grant's result_class, never lowers it; a result from
    an untrusted grant marks the run untrusted for good."""
    return DataClass(max(run.taint, grant.result_class)), bool(run.untrusted or grant.untrusted)


def evaluate(run: RunState, facts: RequestFacts, grants: Sequence[GrantRule], now: datetime) -> Decision:
    """Never raises: any failure is deny policy_error."""
    try:
        return _evaluate(run, facts, grants, now)
    except Exception as exc:  # noqa: BLE001 - the floor is closed: every failure is a deny
        return _mint(Verdict.DENY, DenyReason.POLICY_ERROR, None, f"policy error: {type(exc).__name__}")


def _evaluate(run: RunState, facts: RequestFacts, grants: Sequence[GrantRule], now: datetime) -> Decision:
    if not isinstance(run, RunState) or not isinstance(facts, RequestFacts):
        raise TypeError("evaluate needs a RunState and RequestFacts")
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    for grant in grants:
        if not isinstance(grant, GrantRule):
            raise TypeError("grants must be GrantRule snapshots")
        if grant.broken:
            return _mint(Verdict.DENY, DenyReason.POLICY_ERROR, None, f"broken grant: {grant.broken}")
    sentinels = frozenset(facts.sentinel_secret_ids)
    try:
        method = _method(facts.method)
        scheme = facts.scheme.lower() if isinstance(facts.scheme, str) else ""
        if scheme not in ("http", "https", "tunnel"):
            raise NormalizationError(f"scheme {facts.scheme!r} is not http, https or tunnel")
        host = normalize_host(facts.host)
        port = normalize_port(facts.port, scheme)
        path = "/" if scheme == "tunnel" else normalize_path(facts.path)
    except NormalizationError as exc:
        return _no_grant(f"request rejected: {exc}", sentinels)

    headers = conditions.LazyHeaderIndex(facts.headers)
    body_size = _body_size(facts.body_size)
    mcp = tuple(facts.mcp)
    candidates = []
    for grant in grants:
        if not grant.enabled:
            continue
        spec = matching.match(grant.compiled, worker_id=run.worker_id, method=method, scheme=scheme,
                              host=host, port=port, path=path, mcp=mcp, headers=headers,
                              body_size=body_size)
        if spec is not None:
            candidates.append((spec, grant))
    target = f"{method} {scheme}://{host}:{port}{path}"
    if not candidates:
        near = _near_miss(grants, run, method, scheme, host, port, path, facts, headers, body_size)
        return _no_grant(f"no grant matches {target}" + (f" ({near})" if near else ""), sentinels)

    live = [(s, g) for s, g in candidates if not _expired(g, now)]
    denies = [(s, g) for s, g in live if g.mode == Mode.DENY]
    if denies:
        chosen = _pick(denies)
    else:
        chosen = _pick(candidates)
    if sentinels - ({chosen.secret_id} if chosen.secret_id is not None else set()):
        return _mint(Verdict.DENY, DenyReason.TRIPWIRE, chosen,
                     f"a secret's sentinel was sent toward {host}, which grant {chosen.slug!r} does not "
                     "inject that secret for", tripwire=True)
    if chosen.mode == Mode.DENY and not _expired(chosen, now):
        return _mint(Verdict.DENY, DenyReason.DENIED_BY_GRANT, chosen,
                     f"grant {chosen.slug!r} denies {target}")
    if _expired(chosen, now):
        return _mint(Verdict.DENY, DenyReason.GRANT_EXPIRED, chosen, f"grant {chosen.slug!r} has expired")
    if DataClass(run.taint) > chosen.max_taint:
        return _mint(Verdict.DENY, DenyReason.TAINT_TOO_HIGH, chosen,
                     f"run taint {DataClass(run.taint).label} is above grant {chosen.slug!r}'s max_taint "
                     f"{chosen.max_taint.label}")
    if chosen.mode == Mode.ASK:
        return _mint(Verdict.ASK, None, chosen,
                     f"grant {chosen.slug!r} needs a human's approval for {target}")
    if chosen.mode == Mode.AUTO:
        return _mint(Verdict.ALLOW, None, chosen, f"allowed by grant {chosen.slug!r}")
    raise ValueError(f"unknown mode {chosen.mode!r}")


def _method(method) -> str:
    if not isinstance(method, str) or not method.isascii() or not method.isalpha() or len(method) > 16:
        raise NormalizationError(f"method {method!r} is not an HTTP method")
    return method.upper()


def _body_size(size) -> int | None:
    if size is None:
        return None
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError("body_size must be a whole number of bytes or None")
    return size


def _near_miss(grants, run, method, scheme, host, port, path, facts, headers, body_size) -> str:
    """Why the first grant (by slug) aimed at this request did not match it: an unmet header condition or
    body-size limit. "" when none was aimed at it. Only on the no-match path, so allows pay nothing."""
    for grant in sorted((g for g in grants if g.enabled and g.mode != Mode.DENY
                         and (g.compiled.conditions or g.compiled.max_body_size is not None)),
                        key=lambda g: g.slug):
        if matching.match_target(grant.compiled, worker_id=run.worker_id, method=method, scheme=scheme,
                                 host=host, port=port, path=path, mcp=tuple(facts.mcp)) is not None:
            unmet = matching.unmet_condition(grant.compiled, headers=headers, body_size=body_size)
            if unmet:
                return f"grant {grant.slug!r} would, but {unmet}"
    return ""


def _expired(grant: GrantRule, now: datetime) -> bool:
    return grant.expires_at is not None and grant.expires_at <= now


def _pick(candidates: list) -> GrantRule:
    # Most specific wins; then the stricter mode; then the slug, so the choice never depends on order.
    return max(candidates, key=lambda sg: (sg[0], _STRICTNESS[sg[1].mode], _reverse(sg[1].slug)))[1]


def _reverse(slug: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in slug) + (1,)


def _no_grant(message: str, sentinels: frozenset[int]) -> Decision:
    if sentinels:
        return _mint(Verdict.DENY, DenyReason.TRIPWIRE, None,
                     f"{message}; a secret's sentinel was in the request", tripwire=True)
    return _mint(Verdict.DENY, DenyReason.NO_GRANT, None, message)
