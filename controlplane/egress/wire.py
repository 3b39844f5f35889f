"""The decision service's answers as the gateway receives them (docs/wire.md), and the one table of
deny reasons and the HTTP status the gateway answers the box with for each. The same table is the
contract fixture tests/contract/deny_reasons.json, which the gateway's tests read too, so a reason
added on one side cannot be missed on the other."""

from __future__ import annotations

from django.conf import settings

from controlplane.egress.answer import Concluded, EgressAnswer
from controlplane.metrics.decisions import count_decision
from controlplane.policy.engine import DenyReason, Verdict

DENY_STATUS: dict[DenyReason, int] = {
    DenyReason.NO_GRANT: 403,
    DenyReason.TRIPWIRE: 403,
    DenyReason.GRANT_EXPIRED: 403,
    DenyReason.TAINT_TOO_HIGH: 403,
    DenyReason.DENIED_BY_GRANT: 403,
    DenyReason.APPROVAL_REFUSED: 403,
    DenyReason.APPROVAL_EXPIRED: 403,
    DenyReason.OVER_BUDGET: 402,
    DenyReason.BAD_TOKEN: 407,
    DenyReason.POLICY_ERROR: 503,
}


def box_status(answer: EgressAnswer) -> int:
    """200 for an allow or an ask (the gateway holds it); a deny's status from DENY_STATUS."""
    decision = answer.decision
    if decision.verdict != Verdict.DENY:
        return 200
    return DENY_STATUS[decision.reason]


def answer_body(answer: EgressAnswer) -> dict:
    decision = answer.decision
    allowed = decision.verdict == Verdict.ALLOW
    grant = decision.grant
    return {
        "verdict": str(decision.verdict),
        "reason": str(decision.reason) if decision.reason else None,
        "status": box_status(answer),
        "message": decision.message,
        "decision_id": answer.decision_id,
        "grant": grant.slug if grant else None,
        "tunnel": bool(allowed and grant.tunnel),
        "trace": bool(allowed and grant.trace),
        # The run journal (docs/journal.md): the gateway journals a model call under an allow that says
        # how many bytes of each body to keep; 0 when the grant's journal is off or it is a tunnel.
        "journal_max_bytes": (settings.ROSTER_JOURNAL_MAX_BODY_BYTES
                              if allowed and grant.journal and not grant.tunnel else 0),
        "inject": list(answer.inject) if allowed else [],
        "replace": list(answer.replace) if allowed else [],
        "approval_id": answer.approval_id,
        "hold_seconds": answer.hold_seconds,
        "budget": answer.budget,
        # The model wire format of the request's host when a grant says it (null otherwise): the
        # gateway shapes a refusal as that provider's error, which the agent's SDK reads.
        "wire": decision.wire or None,
    }


def concluded_body(concluded: Concluded) -> dict:
    return {"status": concluded.status, "decision": answer_body(concluded.answer),
            "comment": concluded.comment}


def decided_body(answer: EgressAnswer, seconds: float) -> dict:
    """The answer to POST /decide (controlplane.egress.gateway_calls), counted for
    the metrics on the way out: in-process increments only, nothing that touches the database."""
    count_decision(answer.decision.verdict, answer.decision.reason, seconds)
    return answer_body(answer)
