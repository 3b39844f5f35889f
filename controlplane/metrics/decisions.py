"""Decisions the decision API answered, counted in process: one label lookup and one increment per
decision, nothing that touches the database. Label values are bounded: the verdict, and the deny reason
from the policy engine's fixed set ("granted" for an allow, "approval_required" for an ask)."""

from __future__ import annotations

import os

from prometheus_client import Counter, Histogram

from controlplane.policy.engine import DenyReason, Verdict

ALLOWED = "granted"
HELD = "approval_required"
OTHER = "other"
_REASONS = frozenset(str(r) for r in DenyReason)

DECISIONS = Counter("roster_decisions", "Egress decisions answered to the gateway (POST /decide), by "
                    "verdict and reason", ["verdict", "reason"])
DECIDE_SECONDS = Histogram(
    "roster_decide_seconds", "Time the decision API spent on one POST /decide, from the parsed request to "
    "the durable answer (queueing for the database thread included)",
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5))

# Which process answered (its pid): with several decision API processes (--processes), how the decisions
# spread over them; one series per process that has run since the start.
PROCESS_DECISIONS = Counter("roster_decision_process_decisions", "Egress decisions answered by each "
                            "decision API process, by its pid", ["pid"])
_THIS_PROCESS = PROCESS_DECISIONS.labels(str(os.getpid()))

# Every series exists from the first scrape, at 0; a decision increments a child looked up once here.
_CHILDREN = {(str(Verdict.DENY), reason): DECISIONS.labels(str(Verdict.DENY), reason)
             for reason in sorted(_REASONS | {OTHER})}
_CHILDREN[(str(Verdict.ALLOW), ALLOWED)] = DECISIONS.labels(str(Verdict.ALLOW), ALLOWED)
_CHILDREN[(str(Verdict.ASK), HELD)] = DECISIONS.labels(str(Verdict.ASK), HELD)


def reason_label(verdict: str, reason: str | None) -> str:
    if verdict == Verdict.ALLOW:
        return ALLOWED
    if verdict == Verdict.ASK:
        return HELD
    return reason if reason in _REASONS else OTHER


def count_decision(verdict, reason, seconds: float) -> None:
    """One answered decision: its verdict, its (bounded) reason, and how long it took."""
    verdict = str(verdict)
    key = (verdict, reason_label(verdict, str(reason) if reason else None))
    child = _CHILDREN.get(key)
    (child or DECISIONS.labels(str(Verdict.DENY), OTHER)).inc()  # an unknown verdict: a deny, "other"
    DECIDE_SECONDS.observe(seconds)
    _THIS_PROCESS.inc()
