"""Deny reasons and the HTTP status the box sees for each (docs/wire.md). The control plane's reasons
are pinned by tests/contract/deny_reasons.json, shared by both sides, so a reason added on one side is
missed by neither; the gateway's own reasons are refusals it makes before or after asking."""

from __future__ import annotations

from roster_gateway.wire import DENY_STATUSES, WireDecision

# Reasons the control plane answers with (the same as tests/contract/deny_reasons.json).
CONTROL_PLANE_STATUS = {
    "no_grant": 403, "tripwire": 403, "grant_expired": 403, "taint_too_high": 403, "denied_by_grant": 403,
    "approval_refused": 403, "approval_expired": 403,
    "over_budget": 402, "bad_token": 407, "policy_error": 503,
}

# Reasons only the gateway gives: the request's shape, its address, or the gateway's own failures.
GATEWAY_STATUS = {
    "malformed_request": 400, "authority_mismatch": 403, "protocol_refused": 403, "blocked_address": 403,
    "body_too_large": 413, "uri_too_long": 414, "headers_too_large": 431,
    "control_plane_unavailable": 503, "trace_failed": 503,
}


def deny_status(decision: WireDecision) -> int:
    """The status for a control-plane deny: the reason's own status; for a reason this gateway does not
    know yet, the status the control plane sent if it is a deny status, else 403 (a deny either way)."""
    reason = decision.reason or "policy_error"
    if reason in CONTROL_PLANE_STATUS:
        return CONTROL_PLANE_STATUS[reason]
    return decision.status if decision.status in DENY_STATUSES else 403
