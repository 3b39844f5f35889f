"""The policy engine: a pure function from (run state, request facts, grants) to a Decision.

The engine is the sole producer of decisions: it alone imports controlplane.policy.decision, where a
Decision is minted (pyproject's import contracts), and everyone else gets one through `evaluate`,
`deny` or `allow_approved`, and checks it with `require_authentic`. Precedence and the pattern
language are documented in docs/grants.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from controlplane.core.taint import DataClass
from controlplane.policy import conditions, matching
from controlplane.policy.decision import Decision, DenyReason, Verdict
from controlplane.policy.decision import is_authentic as is_authentic  # re-exported: the engine's API
from controlplane.policy.decision import mint as _mint
from controlplane.policy.decision import require_authentic as require_authentic  # re-exported
from controlplane.policy.normalize import (
    DEFAULT_PORTS,
    NormalizationError,
    normalize_host,
    normalize_path,
    normalize_port,
)
from controlplane.policy.rules import GrantRule as GrantRule  # re-exported: the engine's API
from controlplane.policy.rules import McpCall as McpCall
from controlplane.policy.rules import Mode as Mode
from controlplane.policy.rules import RequestFacts as RequestFacts
from controlplane.policy.rules import RunState as RunState

# Ties between equally specific grants go to the stricter mode.
_STRICTNESS = {Mode.DENY: 2, Mode.ASK: 1, Mode.AUTO: 0}


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

    # Every step below (matching, the host's wire format, sentinel homes, near misses) rules out a grant
    # for another host before anything else, so only the grants whose host pattern covers this host are
    # judged: the same decision, without a call per grant of the worker's whole list.
    grants = [g for g in grants if matching.covers_host(g.compiled, host)]
    headers = conditions.LazyHeaderIndex(facts.headers)
    body_size = _body_size(facts.body_size)
    mcp = tuple(facts.mcp)
    wire = _host_wire(grants, run.worker_id, host)
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
        message = f"no grant matches {target}" + (f" ({near})" if near else "")
        return _no_grant(message, sentinels, _sentinel_homes(sentinels, grants, run.worker_id, host, port),
                         wire)

    live = [(s, g) for s, g in candidates if not _expired(g, now)]
    denies = [(s, g) for s, g in live if g.mode == Mode.DENY]
    if denies:
        chosen = _pick(denies)
    else:
        chosen = _pick(candidates)
    wire = chosen.wire or wire
    stray = sentinels - ({chosen.secret_id} if chosen.secret_id is not None else set())
    if stray:
        homes = _sentinel_homes(stray, grants, run.worker_id, host, port)
        if stray - homes.keys():
            return _mint(Verdict.DENY, DenyReason.TRIPWIRE, chosen,
                         f"a secret's sentinel was sent toward {host}, which grant {chosen.slug!r} does not "
                         "inject that secret for", tripwire=True, wire=wire)
        return _mint(Verdict.DENY, DenyReason.NO_GRANT, None,
                     f"{target} matches grant {chosen.slug!r}, which does not inject {_homes_text(homes)}",
                     wire=wire)
    if chosen.mode == Mode.DENY and not _expired(chosen, now):
        return _mint(Verdict.DENY, DenyReason.DENIED_BY_GRANT, chosen,
                     f"grant {chosen.slug!r} denies {target}", wire=wire)
    if _expired(chosen, now):
        return _mint(Verdict.DENY, DenyReason.GRANT_EXPIRED, chosen, f"grant {chosen.slug!r} has expired",
                     wire=wire)
    if DataClass(run.taint) > chosen.max_taint:
        return _mint(Verdict.DENY, DenyReason.TAINT_TOO_HIGH, chosen,
                     f"run taint {DataClass(run.taint).label} is above grant {chosen.slug!r}'s max_taint "
                     f"{chosen.max_taint.label}", wire=wire)
    if chosen.mode == Mode.ASK:
        return _mint(Verdict.ASK, None, chosen,
                     f"grant {chosen.slug!r} needs a human's approval for {target}", wire=wire)
    if chosen.mode == Mode.AUTO:
        return _mint(Verdict.ALLOW, None, chosen, f"allowed by grant {chosen.slug!r}", wire=wire)
    raise ValueError(f"unknown mode {chosen.mode!r}")


def _names_host(grant: GrantRule, worker_id: int, host: str, port: int | None = None) -> bool:
    """Whether the grant applies to this worker and names this host (any path or method), and with `port`
    that port too: the grant's own, or its schemes' default ports when it names none."""
    compiled = grant.compiled
    if compiled is None or not grant.enabled or compiled.tunnel:
        return False
    if compiled.worker_id is not None and compiled.worker_id != worker_id:
        return False
    if not matching.covers_host(compiled, host):
        return False
    if port is None:
        return True
    ports = {compiled.port} if compiled.port is not None else {DEFAULT_PORTS[s] for s in compiled.schemes}
    return port in ports


def _host_wire(grants: Sequence[GrantRule], worker_id: int, host: str) -> str:
    """The model wire format this worker's grants say the host speaks ("" when none says, or they
    disagree): a refusal toward it is shaped as that provider's error."""
    wires = {g.wire for g in grants if g.wire and _names_host(g, worker_id, host)}
    return next(iter(wires)) if len(wires) == 1 else ""


def _sentinel_homes(sentinel_ids: frozenset[int], grants: Sequence[GrantRule], worker_id: int, host: str,
                    port: int) -> dict[int, list[GrantRule]]:
    """For each sentinel's secret, the grants of that same secret that name this host and port. A sentinel
    with a home here went back to the service it belongs to (another path or method than its grant
    covers): not exfiltration, so not a tripwire (docs/grants.md, "Sentinels")."""
    homes: dict[int, list[GrantRule]] = {}
    if not sentinel_ids:
        return homes
    for grant in grants:
        if grant.secret_id in sentinel_ids and _names_host(grant, worker_id, host, port):
            homes.setdefault(grant.secret_id, []).append(grant)
    return homes


def _homes_text(homes: dict[int, list[GrantRule]]) -> str:
    parts = []
    for secret_id in sorted(homes):
        home = min(homes[secret_id], key=lambda g: g.slug)
        name = home.secret_name or f"#{secret_id}"
        covers = " ".join(home.methods) or "any method"
        paths = " ".join(home.paths) or "any path"
        parts.append(f"the sentinel of secret {name!r} sent with it (that secret's grant {home.slug!r} "
                     f"covers {covers} {paths} on this host); denied, nothing injected")
    return "; ".join(parts)


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


def _no_grant(message: str, sentinels: frozenset[int], homes: dict[int, list[GrantRule]] | None = None,
              wire: str = "") -> Decision:
    """No grant covers the request. With a sentinel in it: a tripwire, unless every sentinel went to a
    host a grant of its own secret names (then no_grant, nothing injected, the secret named)."""
    homes = homes or {}
    if sentinels and sentinels - homes.keys():
        return _mint(Verdict.DENY, DenyReason.TRIPWIRE, None,
                     f"{message}; a secret's sentinel was in the request", tripwire=True, wire=wire)
    if sentinels:
        return _mint(Verdict.DENY, DenyReason.NO_GRANT, None, f"{message}; {_homes_text(homes)}", wire=wire)
    return _mint(Verdict.DENY, DenyReason.NO_GRANT, None, message, wire=wire)
