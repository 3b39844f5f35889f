"""The decision API's limits the gateway must keep within, as its health answer carries them (docs/wire.md,
GET /health; docs/settings.md, "Shared by the gateway and the control plane"). The gateway compares its own
options with these when it starts and on every health probe, and refuses every request while one
disagrees: a gateway sending more than the decision API accepts would have its outcome reports refused
(bytes never charged), its requests denied for the wrong reason, or its holds cut short."""

from __future__ import annotations

from django.conf import settings


def approval_hold_seconds() -> int:
    """How long the gateway holds an asked request (every ask answer's hold_seconds): the hold, bounded by
    the approval's own life."""
    return min(settings.ROSTER_APPROVAL_HOLD_SECONDS, settings.ROSTER_APPROVAL_TTL_SECONDS)


def gateway_limits() -> dict[str, int | str]:
    """Each the control plane's value of one setting the gateway shares (key: the wire's name)."""
    return {
        "outcome_batch_max": settings.ROSTER_OUTCOME_BATCH_MAX,
        "approval_wait_max_seconds": int(settings.ROSTER_APPROVAL_WAIT_MAX_SECONDS),
        "approval_hold_seconds": approval_hold_seconds(),
        "body_preview_bytes": settings.ROSTER_BODY_PREVIEW_BYTES,
        "decide_max_path_bytes": settings.ROSTER_DECIDE_MAX_PATH_BYTES,
        "decide_max_headers": settings.ROSTER_DECIDE_MAX_HEADERS,
        "decide_max_header_bytes": settings.ROSTER_DECIDE_MAX_HEADER_BYTES,
        "budget_wait_ms": settings.ROSTER_BUDGET_WAIT_MS,
        "proposals_host": settings.ROSTER_PROPOSALS_HOST,
    }


# The optional outcome fields this control plane takes beyond the base outcome (docs/wire.md, POST
# /outcome); its health answer names them, and the gateway sends only those (outcomes are strict: an
# unknown field refuses the whole batch).
OUTCOME_FIELDS = ("response_sha256",)
