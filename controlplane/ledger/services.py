"""Budgets as an append-only ledger: reserve when a decision allows, settle when the gateway reports
the outcome. Every change appends spend lines plus one "spend" audit record in the same transaction."""

from __future__ import annotations

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from controlplane.audit.services import audit_append, lock_chain_head
from controlplane.fleet.models import Worker
from controlplane.ledger.models import Cap, SpendLine, Unit
from controlplane.ledger.totals import scope_of, spent_for
from controlplane.ledger.types import (
    AlreadySettled,
    DuplicateReservation,
    OverBudget,
    Reservation,
    UnknownDecision,
)


def _serialise() -> None:
    """Totals are read and then appended to; two of those must never interleave. Every ledger change
    appends an audit record anyway, so it takes the audit chain's lock first (one lock order, no
    deadlock between the two); on SQLite the IMMEDIATE transaction already holds the write lock."""
    lock_chain_head()


def _first_broken_cap(worker: Worker, cost_micro: int) -> OverBudget | None:
    caps = list(Cap.objects.filter(Q(worker__isnull=True) | Q(worker=worker)).order_by("id"))
    if not caps:
        return None
    for cap in caps:
        if cap.worker_id:
            cap.worker = worker  # names the scope without another query
    spent = spent_for(caps, timezone.now())
    for cap in caps:
        used = spent[cap.pk]
        if cap.unit == Unit.REQUESTS:
            broken = used + 1 > cap.limit
        elif cap.unit == Unit.MICRO:
            broken = used + cost_micro > cap.limit
        else:  # bytes are known only at settle: refuse once what is already spent reaches the cap
            broken = used >= cap.limit
        if broken:
            return OverBudget(scope=scope_of(cap), unit=cap.unit, window=cap.window, limit=cap.limit,
                              spent=used)
    return None


def _reserve(worker, run, grant_slug, decision_id, cost_micro, origin) -> Reservation | OverBudget:
    _serialise()
    if SpendLine.objects.filter(decision_id=decision_id).exists():
        raise DuplicateReservation(f"decision {decision_id} already has a reservation")
    over = _first_broken_cap(worker, cost_micro)
    if over is not None:
        return over
    common = {"worker": worker, "run": run, "grant_slug": grant_slug, "decision_id": decision_id,
              "kind": SpendLine.Kind.RESERVE}
    lines = [SpendLine(unit=Unit.REQUESTS, amount=1, **common)]
    if cost_micro:
        lines.append(SpendLine(unit=Unit.MICRO, amount=cost_micro, **common))
    SpendLine.objects.bulk_create(lines)
    audit_append("spend", {"op": "reserve", "decision_id": decision_id, "grant": grant_slug,
                           "origin": origin, "requests": 1, "micro": cost_micro},
                 run=run, worker=worker.name)
    return Reservation(decision_id=decision_id, worker_id=worker.pk, requests=1, micro=cost_micro)


def reserve(*, worker, run, grant_slug: str, decision_id: str, cost_micro: int,
            origin: str) -> Reservation | OverBudget:
    """Check every worker and org cap for the current windows and, if none would break, append the
    reserve lines. Call inside the decision's transaction. Returns OverBudget naming the first cap
    that would break (nothing is written then)."""
    if not decision_id:
        raise ValueError("decision_id is required")
    if not isinstance(cost_micro, int) or isinstance(cost_micro, bool) or cost_micro < 0:
        raise ValueError("cost_micro must be a non-negative integer")
    if connection.in_atomic_block:
        return _reserve(worker, run, grant_slug, decision_id, cost_micro, origin)
    with transaction.atomic():
        return _reserve(worker, run, grant_slug, decision_id, cost_micro, origin)


def _settle(decision_id: str, request_bytes: int, response_bytes: int) -> None:
    _serialise()
    lines = list(SpendLine.objects.filter(decision_id=decision_id).select_related("worker"))
    reserved = [ln for ln in lines if ln.kind == SpendLine.Kind.RESERVE]
    if not reserved:
        raise UnknownDecision(f"no reservation for decision {decision_id}")
    if any(ln.kind == SpendLine.Kind.SETTLE for ln in lines):
        raise AlreadySettled(f"decision {decision_id} is already settled")
    first = reserved[0]
    total = request_bytes + response_bytes
    SpendLine.objects.create(worker=first.worker, run_id=first.run_id, grant_slug=first.grant_slug,
                             decision_id=decision_id, kind=SpendLine.Kind.SETTLE, unit=Unit.BYTES,
                             amount=total)
    audit_append("spend", {"op": "settle", "decision_id": decision_id, "grant": first.grant_slug,
                           "request_bytes": request_bytes, "response_bytes": response_bytes,
                           "bytes": total},
                 run=first.run_id, worker=first.worker.name)


def settle(decision_id: str, request_bytes: int, response_bytes: int) -> None:
    """Record the bytes of a reserved call once it has happened. Raises UnknownDecision or
    AlreadySettled (both LedgerError); nothing is written then."""
    for name, value in (("request_bytes", request_bytes), ("response_bytes", response_bytes)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer")
    if connection.in_atomic_block:
        return _settle(decision_id, request_bytes, response_bytes)
    with transaction.atomic():
        return _settle(decision_id, request_bytes, response_bytes)
