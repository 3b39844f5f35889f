"""After an allowed decision: /outcome settles its reservation with the real bytes (one or a batch per
transaction), auditing as a tripwire any echo of the injected secret the gateway scrubbed from the
response, and /trace stores a model input byte-exactly before the gateway forwards it."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence

from django.conf import settings
from django.db import transaction

from controlplane.audit.models import ModelTrace
from controlplane.audit.services import audit_append
from controlplane.core.errors import RosterError
from controlplane.egress.db_thread import groupable, in_group
from controlplane.fleet.models import Run, RunDecision
from controlplane.fleet.sql import run_decision_for_outcome, run_decision_mark_outcome
from controlplane.ledger.services import settle
from controlplane.ledger.types import AlreadySettled, TokenUsage, UnknownDecision

log = logging.getLogger(__name__)


class OutcomeUnknown(RosterError):
    """No allowed decision with this id (404)."""


class OutcomeConflict(RosterError):
    """The decision's outcome (or trace) was already reported (409)."""


def outcome_report(decision_id: str, status: int, request_bytes: int, response_bytes: int,
                   error: str = "", scrubbed: int = 0, usage: TokenUsage | None = None,
                   response_sha256: str | None = None) -> None:
    """Settle the reservation with the real bytes (and the response body's digest, when the gateway
    sent one: it goes on the run decision and the settle's `spend` audit record). The run's taint was
    raised by the decision itself (controlplane.egress.decide), so an outcome that is late, lost or never
    sent lowers nothing. `scrubbed` > 0 (echoes of the injected secret the gateway removed from the
    response) is audited as a tripwire in the same transaction."""
    with transaction.atomic():
        _settle_outcome(decision_id, status, request_bytes, response_bytes, scrubbed, usage,
                        response_sha256)


OUTCOME_RESULTS = {OutcomeUnknown: "unknown", OutcomeConflict: "already_settled"}


@groupable
def outcomes_report(outcomes: Sequence[tuple]) -> list[str]:
    """Settle many outcomes in one transaction; one result per outcome, in order: "ok", "unknown" or
    "already_settled". An unknown or settled id writes nothing before it is refused, so it cannot spoil
    its neighbours. Alone, any other failure rolls the batch back and each outcome is retried on its own;
    in a group (controlplane.egress.db_thread) it raises, so the group rolls back and this batch is
    settled again alone."""
    if in_group():
        return [_settle_one(*outcome) for outcome in outcomes]
    try:
        with transaction.atomic():
            return [_settle_one(*outcome) for outcome in outcomes]
    except Exception as exc:  # noqa: BLE001 - one broken outcome must not lose the others
        log.error("outcome batch failed (%s); settling one by one", type(exc).__name__)
    results = []
    for outcome in outcomes:
        try:
            with transaction.atomic():
                results.append(_settle_one(*outcome))
        except Exception as exc:  # noqa: BLE001 - reported to the gateway as this outcome's failure
            log.error("outcome %s failed: %s", outcome[0], type(exc).__name__)
            results.append("error")
    return results


def _settle_one(decision_id: str, status: int, request_bytes: int, response_bytes: int, error: str,
                scrubbed: int = 0, usage: TokenUsage | None = None,
                response_sha256: str | None = None) -> str:
    try:
        _settle_outcome(decision_id, status, request_bytes, response_bytes, scrubbed, usage,
                        response_sha256)
    except (OutcomeUnknown, OutcomeConflict) as exc:
        return OUTCOME_RESULTS[type(exc)]
    return "ok"


def _settle_outcome(decision_id: str, status: int, request_bytes: int, response_bytes: int,
                    scrubbed: int = 0, usage: TokenUsage | None = None,
                    response_sha256: str | None = None) -> None:
    record = run_decision_for_outcome(decision_id)
    if record is None:
        raise OutcomeUnknown(decision_id)
    record_id, outcome_at, run_id, grant_slug, secret_name, url = record
    if outcome_at is not None:
        raise OutcomeConflict(decision_id)
    try:
        settle(decision_id, request_bytes, response_bytes, usage, response_sha256=response_sha256)
    except UnknownDecision as exc:
        raise OutcomeUnknown(decision_id) from exc
    except AlreadySettled as exc:
        raise OutcomeConflict(decision_id) from exc
    run_decision_mark_outcome(record_id, status, response_sha256 or "")
    if scrubbed > 0:
        _audit_echo(decision_id, run_id, grant_slug, secret_name, url, scrubbed)


def _audit_echo(decision_id: str, run_id: int, grant_slug: str, secret_name: str, url: str,
                scrubbed: int) -> None:
    """The upstream sent the injected secret back: the box got the sentinel instead, but an upstream
    that reflects credentials is worth a human's look. Names the secret, never its value."""
    name = secret_name or "(unrecorded)"
    run = Run.objects.select_related("worker").get(pk=run_id)
    audit_append("tripwire", {
        "decision_id": decision_id, "url": url, "grant": grant_slug, "secret": secret_name or None,
        "scrubbed": scrubbed,
        "message": f"upstream echoed the injected secret {name}; {scrubbed} occurrence"
                   f"{'' if scrubbed == 1 else 's'} scrubbed before the box",
    }, run=run)


def trace_store(decision_id: str, body: bytes) -> str:
    """Store a model input byte-exactly before the gateway forwards it. Returns its SHA-256."""
    if len(body) > settings.ROSTER_TRACE_MAX_BYTES:
        raise ValueError("trace body larger than ROSTER_TRACE_MAX_BYTES")
    digest = hashlib.sha256(body).hexdigest()
    with transaction.atomic():
        record = RunDecision.objects.select_for_update().select_related("run__worker").filter(
            decision_id=decision_id).first()
        if record is None:
            raise OutcomeUnknown(decision_id)
        if record.traced:
            raise OutcomeConflict(decision_id)
        ModelTrace.objects.create(run_id_ref=record.run_id, grant_slug=record.grant_slug,
                                  decision_id=decision_id, method=record.method, url=record.url,
                                  sha256=digest, size=len(body), body=body)
        record.traced = True
        record.save(update_fields=["traced"])
        audit_append("trace", {"decision_id": decision_id, "grant": record.grant_slug, "url": record.url,
                               "sha256": digest, "size": len(body)}, run=record.run)
    return digest
