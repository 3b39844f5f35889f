"""Try a request against the grants before trusting them: which grant decides a request, and why, under
the engine's full precedence (most specific match, deny outranks, expiry, taint), optionally with a
draft grant (an unsaved change) in place of the stored one. Read-only: nothing is decided for real,
nothing is reserved or recorded."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.db.models import Q
from django.utils import timezone

from controlplane.core.errors import RosterError
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Worker
from controlplane.policy import conditions, engine, matching
from controlplane.policy.engine import GrantRule, McpCall, RequestFacts, RunState
from controlplane.policy.models import Grant
from controlplane.policy.normalize import NormalizationError, normalize_host, normalize_path, normalize_port


class TrialInvalid(RosterError):
    """The request to try is not one the gateway could judge (bad URL, method, worker, headers)."""


MAX_TRIAL_HEADERS = 100
_TOKEN = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}")


@dataclass(frozen=True)
class Candidate:
    slug: str
    mode: str
    matches: bool
    note: str


@dataclass(frozen=True)
class TrialResult:
    verdict: str
    reason: str | None
    grant: str | None
    message: str
    target: str
    candidates: tuple[Candidate, ...]
    judged_with: str = ""  # the header names and body size the request was judged with (never values)


def stored_rules(worker: Worker) -> list[GrantRule]:
    """Every grant that applies to the worker (its own and the global ones), as the decision API sees
    them. Disabled ones are included: the engine skips them, and the trial explains that."""
    grants = Grant.objects.filter(Q(worker=worker) | Q(worker__isnull=True)).select_related("secret")
    return [GrantRule.from_model(g) for g in grants]


def with_draft(rules: list[GrantRule], draft: GrantRule | None,
               replaces: str | None = None) -> list[GrantRule]:
    """The rule set with a draft in place of the grant it edits (`replaces`, its stored slug) or added."""
    if draft is None:
        return rules
    gone = {replaces or draft.slug}
    return [r for r in rules if r.slug not in gone] + [draft]


def parse_headers(lines) -> tuple[tuple[str, str], ...]:
    """"Name: value" lines (or (name, value) pairs) as the request's headers, as a box would send them."""
    out = []
    for line in lines or ():
        if isinstance(line, tuple | list) and len(line) == 2:
            name, value = line
        elif isinstance(line, str) and ":" in line:
            name, _, value = line.partition(":")
        elif isinstance(line, str) and not line.strip():
            continue
        else:
            raise TrialInvalid(f"header {str(line)[:60]!r} is not 'Name: value'")
        name, value = str(name).strip(), str(value).strip()
        if not _TOKEN.fullmatch(name):
            raise TrialInvalid(f"header name {name[:60]!r} is not a valid header name")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value) or len(value) > 8192:
            raise TrialInvalid(f"header {name}: the value has control characters or is too long")
        out.append((name.lower(), value))
    if len(out) > MAX_TRIAL_HEADERS:
        raise TrialInvalid(f"at most {MAX_TRIAL_HEADERS} headers")
    return tuple(out)


def request_facts(method: str, url: str, mcp_tool: str | None = None, *, headers=(),
                  body_size: int | None = 0) -> RequestFacts:
    if body_size is not None and (isinstance(body_size, bool) or not isinstance(body_size, int)
                                  or not 0 <= body_size <= conditions.MAX_BODY_SIZE):
        raise TrialInvalid("the body size must be a whole number of bytes, 0 or more")
    if not isinstance(url, str) or len(url) > 8192:
        raise TrialInvalid("the URL is missing or too long")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise TrialInvalid("the URL must start with http:// or https://")
    try:
        port = parts.port
    except ValueError as exc:
        raise TrialInvalid(f"bad port: {exc}") from None
    if not parts.hostname:
        raise TrialInvalid("the URL has no host")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    mcp = (McpCall(matching.MCP_TOOL_CALL, mcp_tool),) if mcp_tool else ()
    return RequestFacts(method=(method or "").strip().upper(), scheme=parts.scheme, host=parts.hostname,
                        port=port, path=path, mcp=mcp, headers=parse_headers(headers), body_size=body_size)


def try_request(worker: Worker, method: str, url: str, *, mcp_tool: str | None = None,
                taint: DataClass = DataClass.PRIVATE, rules: list[GrantRule] | None = None,
                now: datetime | None = None, headers=(), body_size: int | None = 0) -> TrialResult:
    """What the engine would answer for this request from a fresh run of `worker` at `taint`, sent with
    `headers` ("Name: value" lines) and a body of `body_size` bytes (0: no body)."""
    now = now or timezone.now()
    facts = request_facts(method, url, mcp_tool, headers=headers, body_size=body_size)
    names = sorted({name for name, _ in facts.headers})
    judged_with = (f"headers {', '.join(names)}" if names else "no headers") + (
        f" and a body of {body_size} bytes" if body_size is not None else " and a body of unknown size")
    rules = stored_rules(worker) if rules is None else rules
    decision = engine.evaluate(RunState(run_id=0, worker_id=worker.pk, taint=DataClass(taint),
                                        untrusted=False), facts, rules, now)
    try:
        scheme = facts.scheme
        host, port = normalize_host(facts.host), normalize_port(facts.port, scheme)
        path = normalize_path(facts.path)
    except NormalizationError as exc:
        return TrialResult(decision.verdict.value, _reason(decision), None, decision.message,
                           f"{facts.method} {url}", (Candidate("-", "-", False, str(exc)),), judged_with)
    index = conditions.header_index(facts.headers)
    candidates = []
    for rule in sorted(rules, key=lambda r: r.slug):
        if rule.broken:
            candidates.append(Candidate(rule.slug, rule.mode.value, False, f"broken: {rule.broken}"))
            continue
        spec = matching.match_target(rule.compiled, worker_id=worker.pk, method=facts.method, scheme=scheme,
                                     host=host, port=port, path=path, mcp=facts.mcp)
        if spec is None:
            continue
        if matching.match(rule.compiled, worker_id=worker.pk, method=facts.method, scheme=scheme, host=host,
                          port=port, path=path, mcp=facts.mcp, headers=index, body_size=body_size) is None:
            unmet = matching.unmet_condition(rule.compiled, headers=index, body_size=body_size)
            candidates.append(Candidate(rule.slug, rule.mode.value, False, f"aimed at it, but {unmet}"))
            continue
        note = "matches"
        if not rule.enabled:
            note = "would match, but is disabled"
        elif rule.expires_at is not None and rule.expires_at <= now:
            note = "matches, but has expired"
        candidates.append(Candidate(rule.slug, rule.mode.value, rule.enabled, note))
    chosen = decision.grant.slug if decision.grant is not None else None
    return TrialResult(decision.verdict.value, _reason(decision), chosen, decision.message,
                       f"{facts.method} {scheme}://{host}:{port}{path}", tuple(candidates), judged_with)


def _reason(decision) -> str | None:
    return decision.reason.value if decision.reason is not None else None


def explain(result: TrialResult) -> list[str]:
    """The answer in lines, for the CLI and the page."""
    lines = [f"{result.target}: {result.verdict}" + (f" ({result.reason})" if result.reason else "")
             + (f" by grant {result.grant}" if result.grant else ""), f"  why: {result.message}"]
    if result.judged_with:
        lines.append(f"  judged with {result.judged_with}")
    for c in result.candidates:
        mark = "*" if c.slug == result.grant else " "
        lines.append(f"  {mark} {c.slug} [{c.mode}] {c.note}")
    if not result.candidates:
        lines.append("  no grant matches this request (no match is deny)")
    return lines
