"""The gateway's API (docs/wire.md) beside its per-request calls, /decide, /outcomes and /journal (those
are controlplane.egress.gateway_calls): thin routes over the decision service (controlplane.egress.conclude,
.outcomes, ...), which answers in domain values; controlplane.egress.wire maps them to the wire.
Authenticated by the gateway's own service credential."""

from __future__ import annotations

import base64
import logging
import uuid

from django.conf import settings
from django.db import connection
from ninja import Router, Status
from ninja.errors import HttpError
from ninja.security import HttpBearer

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_abandon
from controlplane.core.service_token import is_gateway_token
from controlplane.egress import outcomes
from controlplane.egress.approval_wait import wait_for_approval
from controlplane.egress.budget_wait import SETTLED
from controlplane.egress.db_thread import on_db_thread
from controlplane.egress.limits import OUTCOME_FIELDS, gateway_limits
from controlplane.egress.schemas import (
    ErrorOut,
    HealthOut,
    OkOut,
    OutcomeIn,
    SentinelsOut,
    TraceIn,
    WaitIn,
    WaitOut,
)
from controlplane.vault.services import all_sentinels

log = logging.getLogger(__name__)


class GatewayAuth(HttpBearer):
    """Compares the bearer's SHA-256 with the configured hash (read when used, so a token minted after this
    process started counts) in constant time; no hash configured means every call is refused."""

    # async (no I/O inside): ninja then calls it on the event loop instead of hopping to a thread.
    async def authenticate(self, request, token: str):
        return "gateway" if is_gateway_token(token) else None


router = Router(tags=["gateway"], auth=GatewayAuth())


@router.get("/sentinels", response={200: SentinelsOut}, summary="Every sentinel, for the gateway's scan")
async def sentinels(request):
    # Sentinels are placeholders the boxes hold anyway, never secret values; the gateway looks for them
    # (and their encodings) in whole requests and reports what it finds with /decide.
    return 200, {"sentinels": await on_db_thread(request, all_sentinels)}


@router.post("/approvals/{approval_id}/wait", response={200: WaitOut, 404: ErrorOut},
             summary="Long-poll an approval")
async def wait(request, approval_id: uuid.UUID, body: WaitIn):
    # Woken by the decision's announcement, with database reads as the fallback (approval_wait).
    return await wait_for_approval(request, approval_id, body.timeout_seconds)


@router.post("/approvals/{approval_id}/abandon", response={200: OkOut, 404: ErrorOut},
             summary="The gateway stopped holding the request")
async def abandon(request, approval_id: uuid.UUID):
    return await on_db_thread(request, _abandon, approval_id)


def _abandon(approval_id: uuid.UUID) -> Status:
    try:
        approval_abandon(approval_id)
    except Approval.DoesNotExist:
        return Status(404, {"detail": "no such approval"})
    return Status(200, {"ok": True})


@router.post("/outcome", response={200: OkOut, 404: ErrorOut, 409: ErrorOut}, summary="Report an outcome")
async def outcome(request, body: OutcomeIn):
    answered = await on_db_thread(request, _outcome, body)
    SETTLED.notify()  # calls waiting for budget this outcome may have released try again
    return answered


def _outcome(body: OutcomeIn) -> Status:
    try:
        outcomes.outcome_report(body.decision_id, body.status, body.request_bytes, body.response_bytes,
                               body.error, body.scrubbed, body.usage.usage() if body.usage else None,
                               body.response_sha256)
    except outcomes.OutcomeUnknown:
        return Status(404, {"detail": "no allowed decision with this id"})
    except outcomes.OutcomeConflict:
        return Status(409, {"detail": "outcome already reported"})
    return Status(200, {"ok": True})


@router.post("/trace", response={200: OkOut, 404: ErrorOut, 409: ErrorOut, 413: ErrorOut},
             summary="Store a model input byte-exactly")
async def trace(request, body: TraceIn):
    return await on_db_thread(request, _trace, body)


def _trace(body: TraceIn) -> Status:
    raw = base64.b64decode(body.body_b64, validate=True)
    if len(raw) > settings.ROSTER_TRACE_MAX_BYTES:
        return Status(413, {"detail": "trace body too large"})
    try:
        outcomes.trace_store(body.decision_id, raw)
    except outcomes.OutcomeUnknown:
        return Status(404, {"detail": "no allowed decision with this id"})
    except outcomes.OutcomeConflict:
        return Status(409, {"detail": "already traced"})
    return Status(200, {"ok": True})


@router.get("/health", response={200: HealthOut, 503: HealthOut},
            summary="Control plane and database answer; the limits the gateway must keep within")
async def health(request):
    return await on_db_thread(request, _health)


def _health() -> Status:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:  # noqa: BLE001 - any database trouble is "not healthy"
        return Status(503, {"ok": False})
    return Status(200, {"ok": True, "limits": gateway_limits(), "outcome_fields": list(OUTCOME_FIELDS)})


__all__ = ["router", "HttpError"]
