"""What a demo run saw, asked and cost, read back from the records only (audit chain, approvals, spend
ledger), never from what the box printed about itself; and the one-line summary `make demo` ends with."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db.models import Sum

from controlplane.approvals.models import Approval
from controlplane.audit.models import AuditRecord, ModelTrace
from controlplane.core.timefmt import duration_text, when_text
from controlplane.fleet.models import Run
from controlplane.ledger.models import SpendLine


@dataclass
class RunFacts:
    decisions: list[dict] = field(default_factory=list)  # each: verdict, reason, method, url, grant
    approvals: list[Approval] = field(default_factory=list)
    cost: dict[str, int] = field(default_factory=dict)
    model_calls: int = 0
    tokens: int = 0
    allowed: int = 0
    denied: int = 0
    asked: int = 0
    proposals_executed: int = 0
    # proposal id -> its events in chain order, each in words ("proposed", "decided: approved", …)
    proposal_events: dict[str, list[str]] = field(default_factory=dict)
    traces: int = 0
    chat_messages: int = 0  # relayed for the run: messages given to it, and its reply's parts delivered
    chat_approvals: int = 0  # its held requests and proposals decided from an approvers' room


def approval_wait(approval: Approval) -> str:
    """The two deadlines of a held request in words: the box waits only the hold; approved later, until
    the approval expires, it lets an identical retry through for the grace (docs/web.md, "Card states")."""
    box_until = approval.created_at + timedelta(seconds=settings.ROSTER_APPROVAL_HOLD_SECONDS)
    grace = duration_text(settings.ROSTER_APPROVAL_GRACE_SECONDS)
    return (f"the box waits until {when_text(box_until)}; approved later, until "
            f"{when_text(approval.expires_at)}, an identical retry passes within {grace}")


def _data(record: AuditRecord) -> dict:
    body = json.loads(record.body)
    data = body.get("data", body) if isinstance(body, dict) else {}
    return data if isinstance(data, dict) else {}


def _count_chat(facts: RunFacts, kind: str, data: dict) -> None:
    event = data.get("event")
    if kind == "message" and event in ("started_run", "joined_run"):
        facts.chat_messages += 1
    elif kind == "delivery" and event == "delivered":
        facts.chat_messages += int(data.get("parts") or 0)
    elif kind in ("approval", "proposal") and event == "decided" and data.get("channel") == "chat":
        facts.chat_approvals += 1


def _proposal_event(data: dict, record: AuditRecord) -> str:
    """One proposal event in words: the event, and the status it left when that is news (a decision's
    approved/refused, a rejection's reason); never the bare verdict glued to the event."""
    event = str(data.get("event", "") or "?")
    if event == "rejected":
        return f"rejected ({record.reason or data.get('reason', '')})"
    if event in ("decided", "retry") and record.verdict:
        return f"{event}: {record.verdict}"
    return event


def run_facts(run: Run, model_grant: str) -> RunFacts:
    facts = RunFacts()
    for record in AuditRecord.objects.filter(run_id_ref=run.pk).order_by("seq"):
        data = _data(record)
        if record.kind == "decision":
            # A CONNECT is judged for a tunnel grant first; without one the tunnel is opened to judge each
            # request inside it, so that first answer is not a request the run made.
            if data.get("method") == "CONNECT":
                continue
            facts.decisions.append({"verdict": record.verdict, "reason": record.reason,
                                    "method": data.get("method", ""), "url": data.get("url", ""),
                                    "grant": data.get("grant") or ""})
        elif record.kind == "proposal":
            facts.proposal_events.setdefault(str(data.get("proposal") or "refused before stored"),
                                             []).append(_proposal_event(data, record))
            if data.get("event") == "executed":
                facts.proposals_executed += 1
        _count_chat(facts, record.kind, data)
    facts.allowed = sum(1 for d in facts.decisions if d["verdict"] == "allow")
    facts.denied = sum(1 for d in facts.decisions if d["verdict"] == "deny")
    facts.asked = sum(1 for d in facts.decisions if d["verdict"] == "ask")
    facts.model_calls = sum(1 for d in facts.decisions
                            if d["verdict"] == "allow" and d["grant"] == model_grant)
    approvals = Approval.objects.filter(run=run).select_related("decided_by").order_by("created_at")
    facts.approvals = list(approvals)
    rows = SpendLine.objects.filter(run=run).values_list("unit").annotate(total=Sum("amount")).order_by()
    facts.cost = {unit: int(total or 0) for unit, total in rows}
    # Token metering writes token units to the same ledger; until it does, this is 0.
    facts.tokens = sum(amount for unit, amount in facts.cost.items() if "token" in unit)
    facts.traces = ModelTrace.objects.filter(run_id_ref=run.pk).count()
    return facts


def report_lines(run: Run, facts: RunFacts, timeline_url: str) -> list[str]:
    lines = [f"run {run.pk}: {run.status}{f' ({run.status_reason})' if run.status_reason else ''}",
             f"timeline: {timeline_url}", "", "== what the run saw (its transcript, from the run's output)"]
    lines += [f"  {line}" for line in run.output.rstrip("\n").splitlines()]
    lines += ["", "== what it asked (gateway decisions, from the audit chain)"]
    for d in facts.decisions:
        why = d["reason"] or d["grant"]
        lines.append(f"  {d['verdict']:<5} {d['method']:<4} {d['url']}  [{why}]")
    for a in facts.approvals:
        who = a.decided_by.get_username() if a.decided_by else "nobody"
        lines.append(f"  approval {a.status}: {a.request.get('method')} {a.request.get('url')} by {who} "
                     f"({a.channel or 'undecided'})")
    for proposal, events in facts.proposal_events.items():
        lines.append(f"  proposal {proposal[:8]}: {' → '.join(events)}")
    lines += ["", "== what it cost (spend ledger, net per unit)"]
    lines += [f"  {unit}: {amount}" for unit, amount in sorted(facts.cost.items())] or ["  nothing"]
    lines.append(f"  model inputs traced byte-exactly: {facts.traces}")
    return lines


def summary_line(facts: RunFacts, audit_ok: bool, notes: int = 0, commits: int = 0) -> str:
    return (f"demo: {facts.model_calls} model calls, {facts.tokens} tokens metered, {facts.allowed} allowed, "
            f"{facts.denied} denied, {facts.proposals_executed} proposals executed, "
            f"{facts.chat_messages} chat messages relayed, {facts.chat_approvals} chat approvals, "
            f"{notes} notes, {commits} knowledge commits, audit {'OK' if audit_ok else 'BROKEN'}")
