"""Policy dry-run: replay the egress decisions recorded over the last N days against a draft grant set
and list the requests whose verdict would change (allow→deny, deny→allow, →ask...), grouped by host and
worker. Read-only: the only write is its own audited `dry_run` record.

What is replayed: `decision` audit records of a run (method, URL, the run's taint at the time). Left out,
because the draft's grants cannot change them: answers about budget, tokens and broken policy, approval
conclusions (the human's answer), sentinel tripwires, and non-HTTP(S) targets (tunnels).

Headers are not recorded, so a replay carries none. A request aimed at a grant with header conditions
(in the draft) cannot be judged again: its verdict is counted as header-conditioned and said so in the
output, never listed as a change (an unchanged grant set would otherwise "change" every such request;
issue 27.3)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.db.models import Q
from django.utils import timezone

from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Worker
from controlplane.policy import engine, matching
from controlplane.policy.engine import GrantRule, McpCall, RequestFacts, RunState
from controlplane.policy.models import Grant
from controlplane.policy.normalize import NormalizationError, normalize_host, normalize_path, normalize_port
from controlplane.policy.validation import GrantSpec

NOT_GRANT_DECISIONS = frozenset({"over_budget", "bad_token", "policy_error", "approval_refused",
                                 "approval_expired"})
MAX_LISTED = 500


@dataclass(frozen=True)
class Change:
    seq: int
    worker: str
    host: str
    method: str
    url: str
    was: str
    now: str
    grant: str | None


@dataclass
class DryRunReport:
    replayed: int = 0
    skipped: int = 0
    changes: list[Change] = field(default_factory=list)
    # Replays aimed at a grant with header conditions: judged without headers, so not listed as changes.
    header_conditioned: int = 0
    header_conditioned_differ: int = 0

    def grouped(self) -> dict[tuple[str, str], list[Change]]:
        groups: dict[tuple[str, str], list[Change]] = defaultdict(list)
        for change in self.changes:
            groups[(change.host, change.worker)].append(change)
        return dict(sorted(groups.items()))

    def lines(self) -> list[str]:
        out = []
        for (host, worker), changes in self.grouped().items():
            out.append(f"{host} / {worker}: {len(changes)} would change")
            for c in changes[:MAX_LISTED]:
                out.append(f"  #{c.seq} {c.method} {c.url}: {c.was} -> {c.now}"
                           + (f" (grant {c.grant})" if c.grant else ""))
        if self.header_conditioned:
            out.append(f"dry-run: {self.header_conditioned} replayed decisions are aimed at a grant with "
                       "header conditions; headers are not recorded, so their verdict is not judged again "
                       f"({self.header_conditioned_differ} of them differ when judged without headers) and "
                       "none is counted as a change")
        out.append(f"dry-run: {self.replayed} decisions replayed, {len(self.changes)} would change")
        return out


def rules_from_specs(specs: list[GrantSpec]) -> Callable[[Worker], list[GrantRule]]:
    """A draft grant set (e.g. a directory of grant files) as the rules each worker would be judged by."""
    rules = [(spec.values.get("worker"), GrantRule.from_model(Grant(slug=spec.slug, **spec.values)))
             for spec in specs]
    return lambda worker: [rule for owner, rule in rules if owner is None or owner.pk == worker.pk]


def rules_with_draft(draft: GrantRule, replaces: str) -> Callable[[Worker], list[GrantRule]]:
    """The stored grants with one unsaved change (the admin's draft) in place of grant `replaces`."""
    def for_worker(worker: Worker) -> list[GrantRule]:
        grants = Grant.objects.filter(Q(worker=worker) | Q(worker__isnull=True)).exclude(slug=replaces)
        return [GrantRule.from_model(g) for g in grants.select_related("secret")] + [draft]
    return for_worker


def _verdict(decision: engine.Decision) -> str:
    return str(decision.verdict.value)


def dry_run(rules_for: Callable[[Worker], list[GrantRule]], *, days: int, actor: str, source: str,
            now: datetime | None = None) -> DryRunReport:
    if not isinstance(days, int) or days < 1 or days > 3660:
        raise ValueError("days must be a whole number from 1 to 3660")
    now = now or timezone.now()
    report = DryRunReport()
    workers = {w.name: w for w in Worker.objects.all()}
    cache: dict[int, list[GrantRule]] = {}
    records = (AuditRecord.objects.filter(kind="decision", created_at__gte=now - timedelta(days=days))
               .exclude(worker_name="").order_by("seq").iterator(chunk_size=2000))
    for record in records:
        replay = _facts(record)
        worker = workers.get(record.worker_name)
        if replay is None or worker is None or record.reason in NOT_GRANT_DECISIONS:
            report.skipped += 1
            continue
        facts, taint, method, url = replay
        if worker.pk not in cache:
            cache[worker.pk] = rules_for(worker)
        decision = engine.evaluate(RunState(run_id=record.run_id_ref or 0, worker_id=worker.pk, taint=taint,
                                            untrusted=False), facts, cache[worker.pk], now)
        report.replayed += 1
        if _header_conditioned(facts, cache[worker.pk], worker.pk):
            report.header_conditioned += 1
            report.header_conditioned_differ += _verdict(decision) != record.verdict
            continue
        if _verdict(decision) != record.verdict:
            report.changes.append(Change(record.seq, worker.name, facts.host, method, url, record.verdict,
                                         _verdict(decision), decision.grant.slug if decision.grant else None))
    audit_append("dry_run", {"event": "dry-run performed", "source": source[:200], "days": days,
                             "replayed": report.replayed, "skipped": report.skipped,
                             "would_change": len(report.changes),
                             "header_conditioned": report.header_conditioned, "by": actor})
    return report


def _header_conditioned(facts: RequestFacts, rules: list[GrantRule], worker_id: int) -> bool:
    """Whether an enabled grant with header conditions is aimed at this request (host, port, method, path),
    so its verdict depended on headers the record does not keep."""
    conditioned = [r for r in rules if r.enabled and r.compiled is not None and r.compiled.conditions]
    if not conditioned:
        return False
    try:
        host, port = normalize_host(facts.host), normalize_port(facts.port, facts.scheme)
        path = normalize_path(facts.path)
    except NormalizationError:
        return False
    method = facts.method.upper()
    return any(matching.match_target(r.compiled, worker_id=worker_id, method=method, scheme=facts.scheme,
                                     host=host, port=port, path=path, mcp=tuple(facts.mcp))
               for r in conditioned)


def _facts(record: AuditRecord) -> tuple[RequestFacts, DataClass, str, str] | None:
    try:
        data = json.loads(record.body).get("data", {})
    except (ValueError, AttributeError):
        return None
    if not isinstance(data, dict) or data.get("tripwire") or "approved_by" in data:
        return None  # a sentinel tripwire, or an approval's conclusion (the human's answer)
    if data.get("approval") and record.verdict == "allow":
        return None  # the grace pass of an earlier approval
    method, url = data.get("method"), data.get("url")
    if not isinstance(method, str) or not isinstance(url, str):
        return None
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    taint = next((c for c in DataClass if c.label == data.get("taint")), DataClass.PRIVATE)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    mcp = tuple(McpCall(m[0], m[1]) for m in data.get("mcp") or ()
                if isinstance(m, list) and len(m) == 2 and isinstance(m[0], str))
    size = data.get("body_size")  # recorded; headers are not, so a replay is judged without any
    size = size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None
    return (RequestFacts(method=method, scheme=parts.scheme, host=parts.hostname, port=port, path=path,
                         mcp=mcp, body_size=size), taint, method, url)
