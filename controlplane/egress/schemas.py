"""The gateway API's bodies (docs/wire.md): every body rejects unknown fields, bounds every string and
accepts only integers where a number is meant."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

from controlplane.ledger.types import ModelCallFacts, TokenUsage
from controlplane.policy.engine import DenyReason

MAX_TOKEN = 1024
MAX_HOST = 300
MAX_MESSAGE = 2048

Str = Annotated[StrictStr, Field(max_length=MAX_MESSAGE)]
NonNegative = Annotated[StrictInt, Field(ge=0, le=2**53)]


def strict_base64(cls, value: str) -> str:
    """A `body_b64` field: standard base64 only (no whitespace, no other alphabet), so the bytes the
    gateway sent are the bytes decoded."""
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("body_b64 is not valid base64") from None
    return value


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class McpIn(Strict):
    method: Annotated[StrictStr, Field(max_length=128)]
    tool: Annotated[StrictStr, Field(max_length=256)] | None


HeaderValue = Annotated[StrictStr, Field(max_length=settings.ROSTER_DECIDE_MAX_HEADER_BYTES)]
HeaderName = Annotated[StrictStr, Field(min_length=1, max_length=256)]


ModelName = Annotated[StrictStr, Field(max_length=200)]


class ModelCallIn(Strict):
    """A model call's facts as the gateway read them from the request (docs/wire.md)."""

    api: Literal["chat", "responses", "messages", "gemini"]
    model: ModelName
    stream: StrictBool
    max_output_tokens: Annotated[StrictInt, Field(ge=1, le=2**53)] | None
    choices: Annotated[StrictInt, Field(ge=1, le=128)]
    input_estimate: NonNegative

    def facts(self) -> ModelCallFacts:
        return ModelCallFacts(api=self.api, model=self.model, stream=self.stream,
                              max_output_tokens=self.max_output_tokens, choices=self.choices,
                              input_estimate=self.input_estimate)


class UsageIn(Strict):
    """A model call's usage as the gateway read it from the response (docs/wire.md)."""

    known: StrictBool
    model: ModelName
    input: NonNegative
    cached_input: NonNegative
    output: NonNegative
    reasoning: NonNegative
    problem: Annotated[StrictStr, Field(max_length=200)] = ""
    # Optional on the wire: a gateway from before cache writes were priced apart sends neither.
    cache_write: NonNegative = 0
    cache_write_1h: NonNegative = 0

    def usage(self) -> TokenUsage:
        # Counts whose parts exceed their whole are not refused here (that would refuse the whole batch
        # of outcomes): the ledger settles them at the reserved worst case, flagged.
        return TokenUsage(known=self.known, model=self.model, input=self.input,
                          cached_input=self.cached_input, output=self.output,
                          reasoning=self.reasoning, problem=self.problem, cache_write=self.cache_write,
                          cache_write_1h=self.cache_write_1h)


CLIENT_ADDRESS = Annotated[StrictStr, Field(max_length=64)]


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
    # Sentinels the gateway found anywhere in the request (body, cookies, encoded forms); optional.
    sentinels: Annotated[list[Annotated[StrictStr, Field(min_length=1, max_length=512)]],
                         Field(max_length=64)] = []
    model_call: ModelCallIn | None = None
    # The peer address of the box connection the request came in on (docs/wire.md). Missing or "" is
    # taken as given and refused as bad_token, audited, rather than answered 422.
    client: CLIENT_ADDRESS = ""


class SentinelsOut(Strict):
    sentinels: list[str]


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
    reserved: int = 0
    in_flight: int = 0  # model calls still running that hold part of `spent` at their worst case
    held: int = 0  # what they hold; released as they settle


class DecideOut(Strict):
    verdict: Literal["allow", "deny", "ask"]
    reason: Literal[tuple(reason.value for reason in DenyReason)] | None
    status: int
    message: str
    decision_id: str
    grant: str | None
    tunnel: bool
    trace: bool
    journal_max_bytes: int
    inject: list[InjectOut]
    replace: list[ReplaceOut]
    approval_id: str | None
    hold_seconds: int
    budget: BudgetOut | None
    wire: Literal["openai-chat", "openai-responses", "anthropic-messages", "gemini"] | None


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
    usage: UsageIn | None = None  # a model call's usage; absent or not known settles its worst case
    # SHA-256 of the response body as the upstream sent it (streamed ones hashed as they pass); optional:
    # a gateway that predates it, or one that has not yet read this control plane's health, sends none.
    response_sha256: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")] | None = None


class OutcomesIn(Strict):
    outcomes: Annotated[list[OutcomeIn], Field(min_length=1, max_length=settings.ROSTER_OUTCOME_BATCH_MAX)]


class OutcomesOut(Strict):
    results: list[Literal["ok", "unknown", "already_settled", "error"]]


class TraceIn(Strict):
    decision_id: Annotated[StrictStr, Field(min_length=1, max_length=64)]
    body_b64: Annotated[StrictStr, Field(max_length=(settings.ROSTER_TRACE_MAX_BYTES + 2) // 3 * 4)]

    _strict_base64 = field_validator("body_b64")(strict_base64)


class OkOut(Strict):
    ok: bool


class LimitsOut(Strict):
    """The control plane's side of the settings the gateway shares (controlplane.egress.limits)."""

    outcome_batch_max: int
    approval_wait_max_seconds: int
    approval_hold_seconds: int
    body_preview_bytes: int
    decide_max_path_bytes: int
    decide_max_headers: int
    decide_max_header_bytes: int
    budget_wait_ms: int
    proposals_host: str


class HealthOut(Strict):
    ok: bool
    limits: LimitsOut | None = None
    # The optional outcome fields this control plane takes (docs/wire.md): a gateway sends one only when
    # it is named here, so a newer gateway still settles against an older control plane.
    outcome_fields: list[str] | None = None


class ErrorOut(Strict):
    detail: str
