"""POST (or PUT/PATCH) the proposal's JSON to the destination's URL. The Idempotency-Key header carries the
proposal's key so a receiver can drop a repeat; redirects are not followed (the admin named one URL)."""

from __future__ import annotations

import httpx
from django.conf import settings

from controlplane.proposals.executors import Outcome

TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


def send(proposal, credential: str | None) -> Outcome:
    dest = proposal.destination
    headers = {
        **(dest.headers or {}),
        "Content-Type": "application/json",
        "Idempotency-Key": proposal.idempotency_key,
        "X-Roster-Proposal": str(proposal.pk),
    }
    if dest.secret_header and credential:
        headers[dest.secret_header] = dest.secret_format.replace("{secret}", credential)
    try:
        with httpx.Client(
            timeout=settings.ROSTER_EXECUTOR_TIMEOUT_SECONDS, follow_redirects=False, trust_env=False
        ) as client:
            response = client.request(dest.method or "POST", dest.url, json=proposal.payload, headers=headers)
    except httpx.TransportError as exc:
        return Outcome(ok=False, transient=True, summary="no answer", detail=type(exc).__name__)
    summary = f"HTTP {response.status_code}"
    detail = response.text[: settings.ROSTER_EXECUTOR_ANSWER_CHARS]
    if 200 <= response.status_code < 300:
        return Outcome(ok=True, transient=False, summary=summary, detail=detail)
    return Outcome(
        ok=False, transient=response.status_code in TRANSIENT_STATUSES, summary=summary, detail=detail
    )
