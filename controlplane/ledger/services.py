"""Budgets as an append-only ledger: reserve when a decision allows, settle when the gateway reports
the outcome. Every change appends spend lines plus one "spend" audit record in the same transaction."""

from __future__ import annotations

from django.utils import timezone

from controlplane.audit.services import audit_write, lock_chain_head
from controlplane.core.db import current_connection, in_transaction
from controlplane.fleet.models import Worker
from controlplane.ledger import model_spend, sql
from controlplane.ledger.in_flight import held_of
from controlplane.ledger.model_spend import ModelPlan
from controlplane.ledger.models import Cap, SpendLine, Unit
from controlplane.ledger.totals import scope_of, spent_for
from controlplane.ledger.types import (
    AlreadySettled,
    DuplicateReservation,
    ModelCallFacts,
    OverBudget,
    Reservation,
    TokenUsage,
    UnknownDecision,
)


def _serialise(conn=None) -> None:
    """Totals are read and then appended to; two of those must never interleave. Every ledger change
    appends an audit record anyway, so it takes the audit chain's lock first (one lock order, no
    deadlock between the two); on SQLite the IMMEDIATE transaction already holds the write lock."""
    lock_chain_head(conn)


def _caps_of(worker: Worker) -> list[Cap]:
    """The worker's caps and the org's, in id order, each naming its scope without another query."""
    caps = []
    for pk, worker_id, unit, window, limit in sql.cap_rows(worker.pk):
        cap = Cap(id=pk, worker_id=worker_id, unit=unit, window=window, limit=limit)
        if worker_id:
            cap.worker = worker
        caps.append(cap)
    return caps


def _first_broken_cap(worker: Worker, cost_micro: int, model: ModelPlan | None) -> OverBudget | None:
    caps = _caps_of(worker)
    if not caps:
        return None
    now = timezone.now()
    spent = spent_for(caps, now)
    model_micro = model.micro if model else 0
    first_held = None
    for cap in caps:
        used, reserved = spent[cap.pk], 0
        if cap.unit == Unit.REQUESTS:
            reserved = 1
            broken = used + 1 > cap.limit
        elif cap.unit == Unit.MICRO:
            reserved = cost_micro + model_micro
            broken = used + reserved > cap.limit or bool(model and model.unbounded)
        elif cap.unit == Unit.TOKENS:  # only model calls spend tokens
            reserved = model.tokens if model else 0
            broken = bool(model) and (used + reserved > cap.limit or not model.max_output)
        else:  # bytes are known only at settle: refuse once what is already spent reaches the cap
            broken = used >= cap.limit
        if broken:
            detail = ""
            if model and cap.unit == Unit.MICRO and model.unbounded:
                detail = model.unbounded
            elif model and cap.unit == Unit.TOKENS and not model.max_output:
                detail = "the call names no max_tokens and its model has no configured output ceiling"
            held = held_of(cap, now)  # only now, on a refusal: an admitted call never pays for this read
            over = OverBudget(scope=scope_of(cap), unit=cap.unit, window=cap.window, limit=cap.limit,
                              spent=used, reserved=reserved, detail=detail, in_flight=held.calls,
                              held=held.amount)
            if not over.waitable:
                return over
            # Only held: worth waiting for, unless another cap refuses this call for good.
            first_held = first_held or over
    return first_held


def budget_refusal(worker: Worker, cost_micro: int,
                   model_call: ModelCallFacts | None = None) -> OverBudget | None:
    """The cap that would refuse this call for good (not one only held by calls in flight), read without
    writing: an `ask` checks it before opening an approval, since approving could not let the call through
    (issue 27.4: refuse first rather than put a question to a person whose yes would be refused)."""
    model = model_spend.plan(model_call) if model_call is not None else None
    over = _first_broken_cap(worker, cost_micro, model)
    return over if over is not None and not over.waitable else None


def _reserve(worker, run, grant_slug, decision_id, cost_micro, origin,
             model_call: ModelCallFacts | None = None,
             run_decision_follows: bool = False) -> Reservation | OverBudget:
    conn = current_connection()
    _serialise(conn)
    if not run_decision_follows and sql.decision_has_lines(decision_id):
        raise DuplicateReservation(f"decision {decision_id} already has a reservation")
    model = model_spend.plan(model_call) if model_call is not None else None
    over = _first_broken_cap(worker, cost_micro, model)
    if over is not None:
        return over
    moment = timezone.now()
    now = sql.adapted_time(moment)
    common = [worker.pk, run.pk if run is not None else None, grant_slug, decision_id, SpendLine.Kind.RESERVE]
    lines = [[*common, Unit.REQUESTS, 1, now]]
    if cost_micro:
        lines.append([*common, Unit.MICRO, cost_micro, now])
    if model is not None:
        # The model's worst case in lines of its own: the settle releases exactly these.
        lines.append([*common, Unit.TOKENS, model.tokens, now])
        if model.micro:
            lines.append([*common, Unit.MICRO, model.micro, now])
        model_spend.record_reservation(decision_id, model, moment)
    sql.lines_insert(lines)
    record = {"op": "reserve", "decision_id": decision_id, "grant": grant_slug, "origin": origin,
              "requests": 1, "micro": cost_micro + (model.micro if model else 0)}
    if model is not None:
        record["model"] = {"model": model.model[:200], "price": model.price.pattern if model.price else None,
                           "input_estimate": model.input_estimate, "max_output": model.max_output,
                           "tokens": model.tokens, "micro": model.micro}
    audit_write("spend", record, run=run, worker=worker.name)
    return Reservation(decision_id=decision_id, worker_id=worker.pk, requests=1,
                       micro=cost_micro + (model.micro if model else 0), tokens=model.tokens if model else 0)


def reserve(*, worker, run, grant_slug: str, decision_id: str, cost_micro: int,
            origin: str, model_call: ModelCallFacts | None = None,
            run_decision_follows: bool = False) -> Reservation | OverBudget:
    """Check every worker and org cap for the current windows and, if none would break, append the
    reserve lines. Call inside the decision's transaction. Returns OverBudget naming the first cap
    that would break (nothing is written then). A model call also reserves its worst case in tokens
    and money (controlplane.ledger.model_spend). `run_decision_follows`: the caller writes the decision's
    RunDecision in this same transaction (an allow), whose unique decision_id refuses the transaction of a
    second reservation for it, so the lookup for an earlier one is not made."""
    if not decision_id:
        raise ValueError("decision_id is required")
    if not isinstance(cost_micro, int) or isinstance(cost_micro, bool) or cost_micro < 0:
        raise ValueError("cost_micro must be a non-negative integer")
    with in_transaction():
        return _reserve(worker, run, grant_slug, decision_id, cost_micro, origin, model_call,
                        run_decision_follows)


def _settle(decision_id: str, request_bytes: int, response_bytes: int, usage: TokenUsage | None,
            overdue: bool = False, response_sha256: str | None = None) -> None:
    _serialise()
    lines = sql.lines_of_decision(decision_id)
    reserved = [line for line in lines if line[0] == SpendLine.Kind.RESERVE]
    if not reserved:
        raise UnknownDecision(f"no reservation for decision {decision_id}")
    if any(line[0] == SpendLine.Kind.SETTLE for line in lines):
        raise AlreadySettled(f"decision {decision_id} is already settled")
    _kind, worker_id, run_id, grant_slug, worker_name, _unit = reserved[0]
    total = request_bytes + response_bytes
    sql.lines_insert([[worker_id, run_id, grant_slug, decision_id, SpendLine.Kind.SETTLE, Unit.BYTES, total,
                       sql.adapted_time(timezone.now())]])
    record = {"op": "settle", "decision_id": decision_id, "grant": grant_slug,
              "request_bytes": request_bytes, "response_bytes": response_bytes, "bytes": total}
    if response_sha256:  # the outcome's digest of the response body, on the record that settles it
        record["response_sha256"] = response_sha256
    if overdue:  # no outcome arrived in time: its bytes are not known, a model call's worst case stands
        record.update({"overdue": True, "flagged": True})
    # Only a model call reserves tokens (see _reserve): any other call has no model reservation to look up.
    model = None
    if any(line[5] == Unit.TOKENS for line in reserved):
        model = model_spend.settle_model_call(decision_id, usage, worker_id=worker_id, run_id=run_id,
                                              grant_slug=grant_slug)
    if model is not None:
        record["model"] = model
    audit_write("spend", record, run=run_id, worker=worker_name)


def settle(decision_id: str, request_bytes: int, response_bytes: int,
           usage: TokenUsage | None = None, *, overdue: bool = False,
           response_sha256: str | None = None) -> None:
    """Record the bytes of a reserved call once it has happened, and for a model call the tokens and
    money it used (`usage` None or not known: its reserved worst case, flagged). Raises UnknownDecision
    or AlreadySettled (both LedgerError); nothing is written then."""
    for name, value in (("request_bytes", request_bytes), ("response_bytes", response_bytes)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer")
    with in_transaction():
        return _settle(decision_id, request_bytes, response_bytes, usage, overdue, response_sha256)
