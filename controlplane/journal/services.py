"""Storing journaled model calls, and erasing their bodies (docs/journal.md). A call is stored once per
decision, in one transaction with its audit record (`journal`, hashes and sizes only: the bytes are in the
journal's tables, never in the chain). Retention and a forgotten note erase bytes, never rows or hashes;
each erasure is audited with the hashes it touched."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.audit.services import audit_append
from controlplane.fleet.sql import run_decision_for_journal
from controlplane.journal import bodies
from controlplane.journal.models import JournalBody, JournalCall

ERASED_TEXT = b"[erased]"
_AUDIT_HASHES = 1000  # an erasure's record lists at most this many hashes (and counts them all)


@dataclass(frozen=True)
class Part:
    """One side of a journaled call as the gateway sent it (docs/wire.md POST /journal)."""

    body: bytes
    size: int
    truncated: bool = False
    masked: int = 0
    headers: list = field(default_factory=list)
    withheld: str = ""
    streamed: bool = False
    status: int | None = None


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def call_store(decision_id: str, started: float, ended: float, method: str, url: str, request: Part,
               response: Part | None, error: str = "") -> str:
    """"ok", "unknown" (no allowed decision with this id) or "already_settled" (stored before)."""
    with transaction.atomic():
        decision = run_decision_for_journal(decision_id)
        if decision is None:
            return "unknown"
        run_id, grant_slug, worker_name = decision
        if JournalCall.objects.filter(decision_id=decision_id).exists():
            return "already_settled"
        now = timezone.now()
        # The request's pieces and the response's one body, stored together (bodies.store_all).
        request_pieces = bodies.pieces(request.body)
        stored = bodies.store_all(request_pieces + ([response.body] if response is not None else []), now)
        parts = stored[:len(request_pieces)]
        response_sha = stored[-1] if response is not None else ""
        withheld = "; ".join(w for w in (request.withheld, response.withheld if response else "") if w)
        call = JournalCall.objects.create(
            decision_id=decision_id, run_id_ref=run_id, grant_slug=grant_slug,
            started_at=_when(started), ended_at=_when(max(started, ended)), method=method[:16], url=url,
            request_headers=request.headers, request_sha256=bodies.sha256(request.body), request_parts=parts,
            request_size=request.size, request_truncated=request.truncated, request_masked=request.masked,
            status=response.status if response else None,
            response_headers=response.headers if response else [], response_sha256=response_sha,
            response_size=response.size if response else 0,
            response_truncated=bool(response and response.truncated),
            response_masked=response.masked if response else 0,
            response_streamed=bool(response and response.streamed), withheld=withheld[:200],
            error=error[:200])
        audit_append("journal", {
            "action": "stored", "decision_id": decision_id, "grant": grant_slug, "url": url,
            "request_sha256": call.request_sha256, "request_size": request.size,
            "request_truncated": request.truncated, "response_sha256": response_sha,
            "response_size": call.response_size, "response_truncated": call.response_truncated,
            "status": call.status, "masked": call.request_masked + call.response_masked,
        }, run=run_id, worker=worker_name)
    return "ok"


def part_from_wire(doc: dict, status: int | None = None) -> Part:
    return Part(body=base64.b64decode(doc["body_b64"], validate=True), size=doc["size"],
                truncated=doc["truncated"], masked=doc["masked"], headers=doc.get("headers") or [],
                withheld=doc.get("withheld") or doc.get("headers_withheld") or "",
                streamed=bool(doc.get("streamed")), status=status)


def _erase(rows: list[JournalBody], reason: str, new_data) -> list[str]:
    now, erased = timezone.now(), []
    for body in rows:
        data = new_data(bytes(body.data))
        if data is None:
            continue
        body.data, body.erased_at, body.erased_reason = data, now, reason[:200]
        body.save(update_fields=["data", "erased_at", "erased_reason"])
        erased.append(body.sha256)
    return erased


def _audit_erasure(action: str, hashes: list[str], **extra) -> None:
    audit_append("journal", {"action": action, "bodies": len(hashes), "sha256": hashes[:_AUDIT_HASHES],
                             **extra})


def _text_forms(text: str) -> list[bytes]:
    """How a text stands in a JSON body: as it is, and JSON-escaped (ASCII-only or not)."""
    forms = {text.encode("utf-8"), json.dumps(text)[1:-1].encode("utf-8"),
             json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")}
    return sorted((f for f in forms if f), key=len, reverse=True)


def erase_text(text: str, *, reason: str) -> int:
    """A forgotten note's text is cut from every journal body that holds it (memory's forget path): the
    bodies keep their hashes (what they were is on the record) but no longer the text. Returns how many
    bodies changed. Reads every body: forgetting is rare, and a text can sit in any call's history."""
    forms = _text_forms(text.strip())
    if not forms:
        return 0

    def cut(data: bytes):
        if not any(form in data for form in forms):
            return None
        for form in forms:
            data = data.replace(form, ERASED_TEXT)
        return data

    with transaction.atomic():
        rows = JournalBody.objects.select_for_update().only("id", "sha256", "data").iterator()
        candidates = [b for b in rows if any(form in bytes(b.data) for form in forms)]
        erased = _erase(candidates, "a forgotten note's text", cut)
        if erased:
            _audit_erasure("text_erased", erased, reason=reason[:300])
    return len(erased)


def purge_expired(now=None) -> int:
    """Bodies no call has named for ROSTER_JOURNAL_RETENTION_DAYS lose their bytes (beat); call rows and
    hashes stay. Returns how many were erased."""
    days = settings.ROSTER_JOURNAL_RETENTION_DAYS
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    with transaction.atomic():
        rows = list(JournalBody.objects.select_for_update().filter(last_used_at__lt=cutoff,
                                                                   erased_at__isnull=True))
        erased = _erase(rows, f"retention ({days} days)", lambda _data: b"")
        if erased:
            _audit_erasure("retention", erased, days=days)
    return len(erased)
