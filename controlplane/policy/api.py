"""The gateway's API (docs/wire.md): thin routes over controlplane.policy.service. Authenticated by the
gateway's own service credential; bodies reject unknown fields, bound every string, accept only integers."""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import hashlib
import hmac
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Literal

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import connection
from django.utils import timezone
from ninja import Router, Schema, Status
from ninja.errors import HttpError
from ninja.security import HttpBearer
from pydantic import ConfigDict, Field, StrictInt, StrictStr, field_validator

from controlplane.approvals.models import Approval
from controlplane.approvals.selectors import approval_status
from controlplane.approvals.services import approval_abandon, approval_mark_expired
from controlplane.policy import outcomes, service

log = logging.getLogger(__name__)
MAX_TOKEN = 1024
MAX_HOST = 300
MAX_MESSAGE = 2048


class GatewayAuth(HttpBearer):
    """Compares the bearer's SHA-256 with the configured hash in constant time; no hash configured means
    every call is refused."""

    # async (no I/O inside): ninja then calls it on the event loop instead of hopping to a thread.
    async def authenticate(self, request, token: str):
        expected = (settings.ROSTER_GATEWAY_TOKEN_SHA256 or "").strip().lower()
        if not expected or not token:
            return None
        offered = hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
        return "gateway" if hmac.compare_digest(offered, expected) else None


router = Router(tags=["gateway"], auth=GatewayAuth())

Str = Annotated[StrictStr, Field(max_length=MAX_MESSAGE)]
NonNegative = Annotated[StrictInt, Field(ge=0, le=2**53)]


class Strict(Schema):
    model_config = ConfigDict(extra="forbid")


class McpIn(Strict):
    method: Annotated[StrictStr, Field(max_length=128)]
    tool: Annotated[StrictStr, Field(max_length=256)] | None


HeaderValue = Annotated[StrictStr, Field(max_length=settings.ROSTER_DECIDE_MAX_HEADER_BYTES)]
HeaderName = Annotated[StrictStr, Field(min_length=1, max_length=256)]


class DecideIn(Strict):
    token: Annotated[StrictStr, Field(max_length=MAX_TOKEN)]
    method: Annotated[StrictStr, Field(pattern=r"^[A-Z][A-Z-]{0,15}$")]
    scheme: Literal["http", "https", "tunnel"]
    host: Annotated[StrictStr, Field(min_length=1, max_length=MAX_HOST)]
    port: Annotated[StrictInt, Field(ge=1, le=65535)]
    path: Annotated[StrictStr, Field(max_length=settings.ROSTER_DECIDE_MAX_PATH_BYTES)]
    headers: Annotated[list[tuple[HeaderName, HeaderValue]],
                       Field(max_length=settings.ROSTER_DECIDE_MAX_HEADERS)]
    body_size: NonNegative
    body_sha256: Annotated[StrictStr, Field(pattern=r"^([0-9a-f]{64})?$")]
    body_preview: Annotated[StrictStr, Field(max_length=settings.ROSTER_BODY_PREVIEW_BYTES)]
    mcp: Annotated[list[McpIn], Field(max_length=settings.ROSTER_DECIDE_MAX_MCP_CALLS)]


class InjectOut(Strict):
    header: str
    value: str


class ReplaceOut(Strict):
    sentinel: str
    value: str


class BudgetOut(Strict):
    scope: str
    unit: str
    window: str
    limit: int
    spent: int


class DecideOut(Strict):
    verdict: Literal["allow", "deny", "ask"]
    reason: Literal["no_grant", "grant_expired", "taint_too_high", "denied_by_grant", "approval_refused",
                    "approval_expired", "over_budget", "bad_token", "policy_error"] | None
    status: int
    message: str
    decision_id: str
    grant: str | None
    tunnel: bool
    trace: bool
    inject: list[InjectOut]
    replace: list[ReplaceOut]
    approval_id: str | None
    hold_seconds: int
    budget: BudgetOut | None


class WaitIn(Strict):
    timeout_seconds: Annotated[StrictInt, Field(ge=0, le=int(settings.ROSTER_APPROVAL_WAIT_MAX_SECONDS))]


class WaitOut(Strict):
    status: Literal["pending", "approved", "refused", "expired"]
    decision: DecideOut | None
    # The approver's comment with a refusal (also in the decision's message); null otherwise. Optional for
    # the gateway: an older control plane never sends it.
    comment: str | None = None


class OutcomeIn(Strict):
    decision_id: Annotated[StrictStr, Field(min_length=1, max_length=64)]
    status: Annotated[StrictInt, Field(ge=0, le=999)]
    request_bytes: NonNegative
    response_bytes: NonNegative
    error: Str = ""
    # Echoes of the injected secret the gateway replaced in the response; > 0 is audited as a tripwire.
    scrubbed: NonNegative = 0


class OutcomesIn(Strict):
    outcomes: Annotated[list[OutcomeIn], Field(min_length=1, max_length=settings.ROSTER_OUTCOME_BATCH_MAX)]


class OutcomesOut(Strict):
    results: list[Literal["ok", "unknown", "already_settled", "error"]]


class TraceIn(Strict):
    decision_id: Annotated[StrictStr, Field(min_length=1, max_length=64)]
    body_b64: Annotated[StrictStr, Field(max_length=(settings.ROSTER_TRACE_MAX_BYTES + 2) // 3 * 4)]

    @field_validator("body_b64")
    @classmethod
    def _strict_base64(cls, value: str) -> str:
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("body_b64 is not valid base64") from None
        return value


class OkOut(Strict):
    ok: bool


class ErrorOut(Strict):
    detail: str


def _healthy_connection_call(fn, *args):
    # Pool threads keep their database connection between calls (no connect per decision); one that
    # saw errors and no longer answers is dropped so the next call reconnects.
    if connection.connection is not None and connection.errors_occurred and not connection.is_usable():
        connection.close()
    return fn(*args)


# Every write here appends to the audit chain, which admits one writer at a time (SQLite's write lock,
# PostgreSQL's advisory lock), so more threads only add lock contention: on SQLite, threads that lose
# the lock back off in sleeps of up to 100 ms and can starve for seconds under load. One thread (its own
# long-lived connection) serves the requests in arrival order instead.
_db_executor = ThreadPoolExecutor(max_workers=settings.ROSTER_GATEWAY_DB_THREADS,
                                  thread_name_prefix="gateway-db")


async def in_pool(request, fn, *args):
    """Run blocking service code. Under ASGI (daphne) on the gateway API's own database thread(s):
    Django would otherwise start a fresh thread, and so a fresh database connection, for every
    request. Under WSGI (the test client) in the request's own thread, which already is that."""
    if isinstance(request, ASGIRequest):
        call = functools.partial(_healthy_connection_call, fn, *args)
        return await asyncio.get_running_loop().run_in_executor(_db_executor, call)
    return await sync_to_async(_healthy_connection_call, thread_sensitive=True)(fn, *args)


@router.post("/decide", response={200: DecideOut}, summary="Decide one egress request")
async def decide(request, body: DecideIn):
    return await in_pool(request, service.decide, service.EgressRequest(
        token=body.token, method=body.method, scheme=body.scheme, host=body.host, port=body.port,
        path=body.path,
        headers=tuple(body.headers), body_size=body.body_size, body_sha256=body.body_sha256,
        body_preview=body.body_preview, mcp=tuple((m.method, m.tool) for m in body.mcp),
    ))


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
            decision = await in_pool(request, service.policy_error_answer, service.new_decision_id(), "", "")
            return Status(200, {"status": "expired", "decision": decision})
        if status is None:
            return Status(404, {"detail": "no such approval"})
        if status != Approval.Status.PENDING:
            return Status(200, await in_pool(request, service.approval_conclude, approval_id))
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
                               body.error, body.scrubbed)
    except outcomes.OutcomeUnknown:
        return Status(404, {"detail": "no allowed decision with this id"})
    except outcomes.OutcomeConflict:
        return Status(409, {"detail": "outcome already reported"})
    return Status(200, {"ok": True})


@router.post("/outcomes", response={200: OutcomesOut}, summary="Report many outcomes at once")
async def outcomes_batch(request, body: OutcomesIn):
    items = [(o.decision_id, o.status, o.request_bytes, o.response_bytes, o.error, o.scrubbed)
             for o in body.outcomes]
    return {"results": await in_pool(request, outcomes.outcomes_report, items)}


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
