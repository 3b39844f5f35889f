"""The gateway's API (docs/wire.md): thin routes over the decision service (controlplane.egress.decide,
.conclude, .outcomes), which answers in domain values; controlplane.egress.wire maps them to the wire.
Authenticated by the gateway's own service credential."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid

from django.conf import settings
from django.db import connection
from django.utils import timezone
from ninja import Router, Status
from ninja.errors import HttpError
from ninja.security import HttpBearer

from controlplane.approvals.models import Approval
from controlplane.approvals.selectors import approval_status
from controlplane.approvals.services import approval_abandon, approval_mark_expired
from controlplane.core.service_token import is_gateway_token
from controlplane.egress import outcomes
from controlplane.egress.conclude import approval_conclude
from controlplane.egress.db_thread import in_group, in_pool
from controlplane.egress.decide import decide as decide_request
from controlplane.egress.decide import decide_grouped, policy_error_answer
from controlplane.egress.request import EgressRequest, new_decision_id
from controlplane.egress.schemas import (
    DecideIn,
    DecideOut,
    ErrorOut,
    OkOut,
    OutcomeIn,
    OutcomesIn,
    OutcomesOut,
    SentinelsOut,
    TraceIn,
    WaitIn,
    WaitOut,
)
from controlplane.egress.wire import answer_body, concluded_body
from controlplane.vault.services import all_sentinels

log = logging.getLogger(__name__)


class GatewayAuth(HttpBearer):
    """Compares the bearer's SHA-256 with the configured hash (read when used, so a token minted after this
    process started counts) in constant time; no hash configured means every call is refused."""

    # async (no I/O inside): ninja then calls it on the event loop instead of hopping to a thread.
    async def authenticate(self, request, token: str):
        return "gateway" if is_gateway_token(token) else None


router = Router(tags=["gateway"], auth=GatewayAuth())


@router.post("/decide", response={200: DecideOut}, summary="Decide one egress request")
async def decide(request, body: DecideIn):
    return answer_body(await in_group(request, decide_request, decide_grouped, egress_request(body)))


def egress_request(body: DecideIn) -> EgressRequest:
    return EgressRequest(
        token=body.token, method=body.method, scheme=body.scheme, host=body.host, port=body.port,
        path=body.path,
        headers=tuple(body.headers), body_size=body.body_size, body_sha256=body.body_sha256,
        body_preview=body.body_preview, mcp=tuple((m.method, m.tool) for m in body.mcp),
        sentinels=tuple(body.sentinels),
        model_call=body.model_call.facts() if body.model_call else None,
    )


@router.get("/sentinels", response={200: SentinelsOut}, summary="Every sentinel, for the gateway's scan")
async def sentinels(request):
    # Sentinels are placeholders the boxes hold anyway, never secret values; the gateway looks for them
    # (and their encodings) in whole requests and reports what it finds with /decide.
    return 200, {"sentinels": await in_pool(request, all_sentinels)}


def _poll_once(approval_id: uuid.UUID) -> str | None:
    row = approval_status(approval_id)
    if row is None:
        return None
    status, expires_at = row
    if status == Approval.Status.PENDING and expires_at <= timezone.now():
        approval_mark_expired(approval_id)
        return Approval.Status.EXPIRED
    return status


@router.post("/approvals/{approval_id}/wait", response={200: WaitOut, 404: ErrorOut},
             summary="Long-poll an approval")
async def wait(request, approval_id: uuid.UUID, body: WaitIn):
    # Async and polling with short reads: a held request costs no thread and no open transaction.
    deadline = time.monotonic() + min(body.timeout_seconds, settings.ROSTER_APPROVAL_WAIT_MAX_SECONDS)
    while True:
        try:
            status = await in_pool(request, _poll_once, approval_id)
        except Exception as exc:  # noqa: BLE001 - a failure while waiting is a deny, never a bare 500
            log.error("waiting on approval %s failed: %s", approval_id, type(exc).__name__)
            answer = await in_pool(request, policy_error_answer, new_decision_id(), "", "")
            return Status(200, {"status": "expired", "decision": answer_body(answer)})
        if status is None:
            return Status(404, {"detail": "no such approval"})
        if status != Approval.Status.PENDING:
            return Status(200, concluded_body(await in_pool(request, approval_conclude, approval_id)))
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return Status(200, {"status": "pending", "decision": None})
        await asyncio.sleep(min(settings.ROSTER_APPROVAL_POLL_SECONDS, remaining))


@router.post("/approvals/{approval_id}/abandon", response={200: OkOut, 404: ErrorOut},
             summary="The gateway stopped holding the request")
async def abandon(request, approval_id: uuid.UUID):
    return await in_pool(request, _abandon, approval_id)


def _abandon(approval_id: uuid.UUID) -> Status:
    try:
        approval_abandon(approval_id)
    except Approval.DoesNotExist:
        return Status(404, {"detail": "no such approval"})
    return Status(200, {"ok": True})


@router.post("/outcome", response={200: OkOut, 404: ErrorOut, 409: ErrorOut}, summary="Report an outcome")
async def outcome(request, body: OutcomeIn):
    return await in_pool(request, _outcome, body)


def _outcome(body: OutcomeIn) -> Status:
    try:
        outcomes.outcome_report(body.decision_id, body.status, body.request_bytes, body.response_bytes,
                               body.error, body.scrubbed, body.usage.usage() if body.usage else None)
    except outcomes.OutcomeUnknown:
        return Status(404, {"detail": "no allowed decision with this id"})
    except outcomes.OutcomeConflict:
        return Status(409, {"detail": "outcome already reported"})
    return Status(200, {"ok": True})


@router.post("/outcomes", response={200: OutcomesOut}, summary="Report many outcomes at once")
async def outcomes_batch(request, body: OutcomesIn):
    return {"results": await in_group(request, outcomes.outcomes_report, outcomes.outcomes_grouped,
                                      outcome_items(body))}


def outcome_items(body: OutcomesIn) -> list[tuple]:
    return [(o.decision_id, o.status, o.request_bytes, o.response_bytes, o.error, o.scrubbed,
             o.usage.usage() if o.usage else None)
            for o in body.outcomes]


@router.post("/trace", response={200: OkOut, 404: ErrorOut, 409: ErrorOut, 413: ErrorOut},
             summary="Store a model input byte-exactly")
async def trace(request, body: TraceIn):
    return await in_pool(request, _trace, body)


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


@router.get("/health", response={200: OkOut, 503: OkOut}, summary="Control plane and database answer")
async def health(request):
    return await in_pool(request, _health)


def _health() -> Status:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:  # noqa: BLE001 - any database trouble is "not healthy"
        return Status(503, {"ok": False})
    return Status(200, {"ok": True})


__all__ = ["router", "HttpError"]
