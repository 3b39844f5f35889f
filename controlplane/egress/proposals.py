"""The gateway's proposal routes (docs/wire.md, docs/proposals.md), mounted beside /decide under
/api/gateway/. The gateway answers the reserved name (settings.ROSTER_PROPOSALS_HOST) itself by calling
these with the run's proxy token; the box's bytes arrive as base64, parsed strictly here."""

from __future__ import annotations

import base64
import uuid
from typing import Annotated

from django.conf import settings
from ninja import Router, Status
from pydantic import Field, StrictStr, field_validator

from controlplane.egress.db_thread import in_pool
from controlplane.egress.routes import GatewayAuth
from controlplane.egress.schemas import CLIENT_ADDRESS, MAX_TOKEN, Strict, strict_base64
from controlplane.proposals.services import proposal_status_for_box, proposal_submit

router = Router(tags=["proposals"], auth=GatewayAuth())


class ProposeIn(Strict):
    token: Annotated[StrictStr, Field(max_length=MAX_TOKEN)]
    # One byte over the limit still fits, so that an oversized proposal is a legible 413, audited.
    body_b64: Annotated[StrictStr, Field(max_length=(settings.ROSTER_PROPOSAL_MAX_BYTES + 3) // 3 * 4 + 4)]

    client: CLIENT_ADDRESS = ""  # the box connection's peer address, as for /decide (docs/wire.md)

    _strict_base64 = field_validator("body_b64")(strict_base64)


class StatusIn(Strict):
    token: Annotated[StrictStr, Field(max_length=MAX_TOKEN)]
    client: CLIENT_ADDRESS = ""


class BoxAnswer(Strict):
    """The status and JSON the gateway hands the box unchanged."""

    status: int
    body: dict


@router.post("/proposals", response={200: BoxAnswer}, summary="A box's proposal, with its run token")
async def propose(request, body: ProposeIn):
    raw = base64.b64decode(body.body_b64, validate=True)
    answer = await in_pool(request, proposal_submit, body.token, raw, body.client)
    return Status(200, {"status": answer.status, "body": answer.body})


@router.post(
    "/proposals/{proposal_id}/status", response={200: BoxAnswer}, summary="A box polls its own proposal"
)
async def proposal_status(request, proposal_id: uuid.UUID, body: StatusIn):
    answer = await in_pool(request, proposal_status_for_box, body.token, proposal_id, body.client)
    return Status(200, {"status": answer.status, "body": answer.body})
