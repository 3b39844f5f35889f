"""Reads for the web pages. Nothing here changes state."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.audit.export import record_who
from controlplane.audit.models import AuditRecord, ModelTrace
from controlplane.fleet.models import Run, Worker
from controlplane.ledger.models import SpendLine
from controlplane.vault.masking import known_sentinels, mask_text

# --- overview ---

def workers_with_live_runs() -> QuerySet[Worker]:
    return Worker.objects.annotate(
        live_runs=Count("runs", filter=Q(runs__status__in=Run.LIVE_STATUSES)),
        total_runs=Count("runs"),
    ).order_by("name")


def live_runs() -> QuerySet[Run]:
    return Run.objects.filter(status__in=Run.LIVE_STATUSES).select_related("worker").order_by("-id")


def recent_runs(worker: Worker, limit: int = 20) -> QuerySet[Run]:
    return Run.objects.filter(worker=worker).order_by("-id")[:limit]


def pending_approval_count(now: datetime | None = None) -> int:
    now = now or timezone.now()
    return Approval.objects.filter(status=Approval.Status.PENDING, expires_at__gt=now).count()


# --- run timeline ---

@dataclass
class TimelineEntry:
    at: datetime
    kind: str
    verdict: str = ""
    reason: str = ""
    summary: str = ""
    grant: str = ""
    who: str = ""
    cost: dict[str, int] = field(default_factory=dict)
    seq: int | None = None
    data: dict = field(default_factory=dict)


def _record_data(record: AuditRecord) -> dict:
    try:
        body = json.loads(record.body)
    except ValueError:
        return {}
    data = body.get("data", body) if isinstance(body, dict) else {}
    return data if isinstance(data, dict) else {}


def _summary(kind: str, data: dict, sentinels: dict[str, str]) -> str:
    method, url = data.get("method", ""), data.get("url", "") or _target(data)
    if kind == "credential_use":
        how = " and ".join(w for w, on in (("injected", data.get("inject")), ("swapped for its sentinel",
                                                                              data.get("replace"))) if on)
        return mask_text(f"secret {data.get('secret', '')} {how or 'used'} for {url}".strip(), sentinels)
    if kind == "run_input":
        people = ", ".join(f"{p.get('name') or p.get('id')} ({p.get('role')})"
                           for p in data.get("participants", []))
        carried = "carried conversation content" if data.get("carries_conversation") else "no conversation"
        notes = ", ".join(f"note {n}" for n in data.get("notes") or [])
        knowledge = data.get("knowledge") or {}
        checkout = (f"; knowledge checkout {str(knowledge.get('commit', ''))[:12]} "
                    f"({'writable' if knowledge.get('writable') else 'read-only'})" if knowledge else "")
        return (f"input assembled: {carried}" + (f"; in the room: {people}" if people else "")
                + (f"; recalled {notes}" if notes else "") + checkout)
    if kind == "knowledge":
        if data.get("action") == "committed":
            return (f"knowledge commit {str(data.get('commit', ''))[:12]} from proposal "
                    f"{data.get('proposal')}: "
                    + ", ".join(data.get("paths") or []))
        return f"knowledge change refused: {'; '.join(data.get('problems') or [])}"
    if kind == "memory":
        about = data.get("person") or data.get("channel") or "the worker"
        return f"note {data.get('note')} {data.get('action', '')} ({data.get('scope', '')}: {about})"
    if kind == "repair":
        if data.get("action") == "requeue":
            return f"requeue of run {data.get('repairs')} (by {data.get('by', '')})"
        if data.get("action") == "revert_knowledge":
            reverted = ", ".join(str(c)[:12] for c in data.get("commits") or [])
            return (f"repair of run {data.get('repairs')}: knowledge commits {reverted} reverted by commit "
                    f"{str(data.get('commit', ''))[:12]} (by {data.get('by', '')})")
        notes = ", ".join(f"note {n}" for n in data.get("notes") or []) or "no notes held"
        return f"repair of run {data.get('repairs')}: forgot {notes} (by {data.get('by', '')})"
    if kind in ("message", "delivery", "chat_approval"):
        return " ".join(str(data.get(k)) for k in ("event", "channel", "speaker", "role", "why", "post")
                        if data.get(k) not in (None, ""))
    if kind == "run_state":
        return f"{data.get('from') or '—'} → {data.get('to', '')} {data.get('reason', '')}".strip()
    if kind == "spend":
        return (f"{data.get('op', '')} for {data.get('decision_id', '')}".strip()
                + _model_summary(data.get("model")))
    if kind == "approval":
        return mask_text(f"{data.get('event', '')} {method} {url}".strip(), sentinels)
    if url:
        return mask_text(f"{method} {url}".strip(), sentinels)
    return mask_text(str(data.get("message", "")), sentinels)


def _target(data: dict) -> str:
    """Where a record without a URL went, from the parts it has: `https://h:8443/p`, `h:8443` or `h`
    (never "://h:" from missing parts)."""
    host = str(data.get("host") or "")
    if not host:
        return ""
    port = data.get("port")
    where = f"{host}:{port}" if port not in (None, "") else host
    if data.get("scheme"):
        return f"{data['scheme']}://{where}{data.get('path', '')}"
    return where + str(data.get("path", "") or "")


def _model_summary(model: object) -> str:
    """A model call's part of a spend record: what it reserved, or what it used and whether the usage
    was read or is the worst case (flagged)."""
    if not isinstance(model, dict):
        return ""
    text = f": model {model.get('model', '')}"
    if "usage" not in model:
        return text + f", worst case {model.get('tokens', 0)} tokens reserved"
    if model.get("flagged"):
        return text + f", usage unknown ({model.get('problem', '')}): settled at the worst case, flagged"
    written = f", {model['cache_write']} written to cache" if model.get("cache_write") else ""
    return text + (f", {model.get('input', 0)} input ({model.get('cached_input', 0)} cached{written}), "
                   f"{model.get('output', 0)} output ({model.get('reasoning', 0)} reasoning)")


def _spend_cost(data: dict) -> dict[str, int]:
    cost = {unit: int(data[unit]) for unit in ("requests", "micro", "bytes")
            if isinstance(data.get(unit), int) and data[unit]}
    model = data.get("model")
    if isinstance(model, dict) and data.get("op") == "settle":
        for unit in ("tokens", "micro"):
            if isinstance(model.get(unit), int) and model[unit]:
                cost[unit] = cost.get(unit, 0) + model[unit]
    elif isinstance(model, dict) and isinstance(model.get("tokens"), int) and model["tokens"]:
        cost["tokens"] = model["tokens"]  # a reserve: its micro already includes the model's worst case
    return cost


def cost_by_decision(run: Run) -> dict[str, dict[str, int]]:
    """decision_id -> {unit: net amount} from the run's spend lines (reserve, settle, release)."""
    out: dict[str, dict[str, int]] = {}
    for decision_id, unit, total in (SpendLine.objects.filter(run=run).values_list("decision_id", "unit")
                                     .annotate(total=Sum("amount")).order_by()):
        out.setdefault(decision_id, {})[unit] = int(total or 0)
    return out


def run_totals(run: Run) -> dict[str, int]:
    rows = SpendLine.objects.filter(run=run).values_list("unit").annotate(total=Sum("amount")).order_by()
    return {unit: int(total or 0) for unit, total in rows}


def run_timeline(run: Run) -> list[TimelineEntry]:
    """Every audit record of the run in chain order: a decision carries the net cost of its request,
    a spend record its own amounts. Spend lines that no audit record names are listed on their own so
    nothing spent is missing."""
    sentinels = known_sentinels()
    costs = cost_by_decision(run)
    entries: list[TimelineEntry] = []
    named: set[str] = set()
    for rec in AuditRecord.objects.filter(run_id_ref=run.pk).order_by("seq"):
        data = _record_data(rec)
        decision_id = str(data.get("decision_id", ""))
        if decision_id:
            named.add(decision_id)
        if rec.kind == "spend":
            cost = _spend_cost(data)
        else:
            cost = costs.get(decision_id, {}) if rec.kind == "decision" else {}
        entries.append(TimelineEntry(
            at=rec.created_at, kind=rec.kind, verdict=rec.verdict, reason=rec.reason,
            summary=_summary(rec.kind, data, sentinels), grant=str(data.get("grant", "") or ""),
            who=str(data.get("by", "") or ""), cost=cost, seq=rec.seq,
        ))
    for line in SpendLine.objects.filter(run=run).order_by("created_at", "id"):
        if line.decision_id in named:
            continue
        entries.append(TimelineEntry(
            at=line.created_at, kind=f"spend {line.kind}", grant=line.grant_slug,
            summary=line.decision_id, cost={line.unit: line.amount},
        ))
    entries.sort(key=lambda e: (e.at, e.seq if e.seq is not None else 1 << 62))
    return entries


def run_traces(run: Run) -> QuerySet[ModelTrace]:
    """Model inputs stored byte-exactly for this run (the bodies stay in the database, not on the page)."""
    return (ModelTrace.objects.filter(run_id_ref=run.pk).order_by("created_at", "id")
            .only("created_at", "grant_slug", "decision_id", "method", "url", "sha256", "size"))


@dataclass(frozen=True)
class AuditRow:
    record: AuditRecord
    data: str
    who: str = ""
    summary: str = ""


# Keys shown on the record's one-line summary, in this order, when present.
SUMMARY_KEYS = ("event", "action", "status", "method", "url", "grant", "slug", "scope", "comment")
SUMMARY_CHARS = 160


def _one_line(data: dict, sentinels: dict[str, str]) -> str:
    parts = [f"{key}={data[key]}" for key in SUMMARY_KEYS if data.get(key) not in (None, "")]
    text = mask_text(" · ".join(str(p) for p in parts), sentinels)
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def audit_rows(records) -> list[AuditRow]:
    """A page of records with each one's data as indented JSON, sentinels masked; `who` is the person
    behind it (an approver, an admin) where the record names one."""
    sentinels = known_sentinels()
    rows = []
    for r in records:
        data = _record_data(r)
        who = record_who(data)
        rows.append(AuditRow(r, mask_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False),
                                          sentinels),
                             who=mask_text(str(who), sentinels), summary=_one_line(data, sentinels)))
    return rows
