"""What a box may send as a proposal (docs/proposals.md): `{kind, destination, payload, reason}` with one
strict payload schema per kind, unknown fields rejected, every string bounded. The run is never named
here: it comes from the proxy token."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, StrictStr, TypeAdapter, ValidationError, field_validator

from controlplane.proposals.validation import ADDRESS_RE, NAME_RE

__all__ = ["ProposalIn", "parse_proposal", "ValidationError"]

MAX_TEXT = settings.ROSTER_PROPOSAL_MAX_TEXT_BYTES
DestinationName = Annotated[StrictStr, Field(min_length=1, max_length=48, pattern=NAME_RE.pattern)]
Address = Annotated[StrictStr, Field(max_length=320, pattern=ADDRESS_RE.pattern)]
# One header line: no CR/LF (header injection) and within RFC 5322's line limit.
Subject = Annotated[StrictStr, Field(min_length=1, max_length=998, pattern=r"^[^\r\n\x00]*$")]
Branch = Annotated[StrictStr, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._/-]+$")]
Sha = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{40}$")]
FileName = Annotated[StrictStr, Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9._ -]+$")]
ContentType = Annotated[StrictStr, Field(max_length=127, pattern=r"^[a-z0-9.+-]+/[a-z0-9.+-]+$")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def _b64(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not valid base64") from None


class Attachment(Strict):
    filename: FileName
    content_type: ContentType = "application/octet-stream"
    content_b64: StrictStr

    @field_validator("content_b64")
    @classmethod
    def _valid(cls, value: str) -> str:
        _b64(value)
        return value

    def size(self) -> int:
        return len(_b64(self.content_b64))


Reason = Annotated[StrictStr, Field(max_length=2000)]


class WebhookIn(Strict):
    kind: Literal["webhook"]
    destination: DestinationName
    payload: dict[str, Any] = Field(description="the JSON object to send")
    reason: Reason = ""


class EmailContent(Strict):
    to: Annotated[list[Address], Field(min_length=1, max_length=settings.ROSTER_PROPOSAL_MAX_RECIPIENTS)]
    subject: Subject
    body: Annotated[StrictStr, Field(max_length=MAX_TEXT)]
    attachments: Annotated[list[Attachment], Field(max_length=settings.ROSTER_PROPOSAL_MAX_ATTACHMENTS)] = []

    @field_validator("attachments")
    @classmethod
    def _within_limit(cls, value: list[Attachment]) -> list[Attachment]:
        total = sum(a.size() for a in value)
        if total > settings.ROSTER_PROPOSAL_MAX_ATTACHMENT_BYTES:
            raise ValueError(
                f"attachments total {total} bytes, over the limit of "
                f"{settings.ROSTER_PROPOSAL_MAX_ATTACHMENT_BYTES}"
            )
        return value


class EmailIn(Strict):
    kind: Literal["email"]
    destination: DestinationName
    payload: EmailContent
    reason: Reason = ""


class GitPushContent(Strict):
    branch: Branch
    base_commit: Sha
    patch: Annotated[StrictStr, Field(max_length=MAX_TEXT)] | None = None
    bundle_b64: Annotated[StrictStr, Field(max_length=settings.ROSTER_PROPOSAL_MAX_BYTES)] | None = None

    @field_validator("bundle_b64")
    @classmethod
    def _bundle(cls, value: str | None) -> str | None:
        if value is not None and not _b64(value).startswith((b"# v2 git bundle\n", b"# v3 git bundle\n")):
            raise ValueError("not a git bundle")
        return value

    @field_validator("patch")
    @classmethod
    def _patch(cls, value: str | None) -> str | None:
        if value is not None and "\ndiff --git " not in "\n" + value:
            raise ValueError("not a patch from git format-patch (no 'diff --git' section)")
        return value

    def model_post_init(self, _context) -> None:
        if (self.patch is None) == (self.bundle_b64 is None):
            raise ValueError("give exactly one of patch and bundle_b64")


class GitPushIn(Strict):
    kind: Literal["git_push"]
    destination: DestinationName
    payload: GitPushContent
    reason: Reason = ""


class IdentityContent(Strict):
    identity: Annotated[StrictStr, Field(max_length=MAX_TEXT)]


class IdentityEditIn(Strict):
    kind: Literal["identity_edit"]
    payload: IdentityContent
    reason: Reason = ""


class FollowUpContent(Strict):
    task: Annotated[StrictStr, Field(min_length=1, max_length=4000)]


class FollowUpIn(Strict):
    kind: Literal["follow_up"]
    payload: FollowUpContent
    reason: Reason = ""


class MemoryNoteContent(Strict):
    scope: Literal["person", "channel", "worker"]
    text: Annotated[StrictStr, Field(min_length=1, max_length=4000)]
    # person notes: the chat id of someone in the run's conversation
    person: Annotated[StrictStr, Field(max_length=255)] | None = None


class MemoryNoteIn(Strict):
    kind: Literal["memory_note"]
    payload: MemoryNoteContent
    reason: Reason = ""


ProposalIn = Annotated[
    WebhookIn | EmailIn | GitPushIn | IdentityEditIn | FollowUpIn | MemoryNoteIn, Field(discriminator="kind")
]
_adapter = TypeAdapter(ProposalIn)
ProposalModel = WebhookIn | EmailIn | GitPushIn | IdentityEditIn | FollowUpIn | MemoryNoteIn


def parse_proposal(raw: bytes) -> ProposalModel:
    """Strict JSON to one kind's model. Raises ValidationError (also for JSON that does not parse)."""
    return _adapter.validate_json(raw)


def error_messages(exc: ValidationError, limit: int = 10) -> list[str]:
    """Where and what, never the offending input (it is the box's, and may be large or hostile)."""
    out = []
    for err in exc.errors(include_url=False, include_input=False)[:limit]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "body"
        out.append(f"{where}: {err.get('msg', 'invalid')}"[:300])
    return out
