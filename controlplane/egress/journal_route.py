"""POST /api/gateway/journal (docs/wire.md): the gateway's journaled model calls, a few per call, each
stored with its audit record (controlplane.journal.services). Bodies are base64 of at most
ROSTER_JOURNAL_MAX_BODY_BYTES each (the gateway keeps each body within the bound its allow carried).

Answered straight from the ASGI server like /decide and /outcomes (controlplane.egress.gateway_calls): a
model call's journal arrives as its answer ends, just as the agent's next call is decided, so its handling
must not add Django's middleware and request hops to that decision's wait."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from django.conf import settings
from django.db import transaction
from pydantic import Field, StrictBool, StrictInt, StrictStr, field_validator

from controlplane.egress.db_thread import on_db_thread
from controlplane.egress.schemas import NonNegative, Strict, strict_base64
from controlplane.journal.services import call_store, part_from_wire

log = logging.getLogger(__name__)
# The gateway's JOURNAL_BATCH_MAX (roster_gateway.journal_reporter): the request limit is sized for it.
JOURNAL_BATCH_MAX = 4
Header = tuple[Annotated[StrictStr, Field(max_length=256)],
               Annotated[StrictStr, Field(max_length=settings.ROSTER_DECIDE_MAX_HEADER_BYTES)]]
Note = Annotated[StrictStr, Field(max_length=200)]


class BodyIn(Strict):
    size: NonNegative
    truncated: StrictBool
    masked: NonNegative
    body_b64: StrictStr
    headers: Annotated[list[Header], Field(max_length=400)] = []
    withheld: Note = ""
    headers_withheld: Note = ""
    streamed: StrictBool = False
    decoded: StrictBool = False

    @field_validator("body_b64")
    @classmethod
    def _bounded_base64(cls, value: str) -> str:
        # Read when a body arrives, not when this module is imported: the bound is the setting's now.
        if len(value) > (settings.ROSTER_JOURNAL_MAX_BODY_BYTES + 2) // 3 * 4:
            raise ValueError("body_b64 is longer than ROSTER_JOURNAL_MAX_BODY_BYTES allows")
        return strict_base64(cls, value)


class RequestIn(BodyIn):
    method: Annotated[StrictStr, Field(pattern=r"^[A-Z][A-Z-]{0,15}$")]
    url: Annotated[StrictStr, Field(max_length=settings.ROSTER_DECIDE_MAX_PATH_BYTES + 400)]


class ResponseIn(BodyIn):
    status: Annotated[StrictInt, Field(ge=0, le=999)]


class EntryIn(Strict):
    decision_id: Annotated[StrictStr, Field(min_length=1, max_length=64)]
    started: Annotated[float, Field(ge=0, strict=True)]
    ended: Annotated[float, Field(ge=0, strict=True)]
    request: RequestIn
    response: ResponseIn | None = None
    error: Note = ""


class JournalIn(Strict):
    entries: Annotated[list[EntryIn], Field(min_length=1, max_length=JOURNAL_BATCH_MAX)]


async def journal_answer(request, body: JournalIn) -> dict:
    """The answer to one POST /journal: a result per entry, in order. Each entry is a background job of the
    database thread of its own (controlplane.egress.db_thread): a decision queued meanwhile goes first."""
    return {"results": list(await asyncio.gather(
        *(on_db_thread(request, _store, entry, background=True) for entry in body.entries)))}


def _store(entry: EntryIn) -> str:
    try:
        with transaction.atomic():
            response = entry.response
            return call_store(entry.decision_id, entry.started, entry.ended, entry.request.method,
                              entry.request.url, part_from_wire(entry.request.model_dump()),
                              part_from_wire(response.model_dump(), response.status) if response else None,
                              entry.error)
    except Exception as exc:  # noqa: BLE001 - one entry's failure is its own result; the gateway retries
        log.error("journal entry %s not stored: %s", entry.decision_id, type(exc).__name__)
        return "error"
