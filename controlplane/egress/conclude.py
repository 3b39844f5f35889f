"""Concluding an approval: once it has left "pending", turn it into the final decision for the request
the gateway is holding. An approved request is judged again on today's grants and taint."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_abandon, approval_consume
from controlplane.egress.allow import allow
from controlplane.egress.answer import Concluded, EgressAnswer
from controlplane.egress.decide import policy_error_answer, run_state
from controlplane.egress.limits import approval_hold_seconds
from controlplane.egress.policy_cache import grant_rules_for_worker
from controlplane.egress.records import audit_decision
from controlplane.egress.request import new_decision_id, request_facts
from controlplane.fleet.models import Run
from controlplane.ledger.types import ModelCallFacts
from controlplane.policy import engine
from controlplane.policy.engine import DenyReason, Verdict
from controlplane.vault.redact import MASK

log = logging.getLogger(__name__)

WAIT_STATUS = {Approval.Status.APPROVED: "approved", Approval.Status.REFUSED: "refused",
               Approval.Status.EXPIRED: "expired", Approval.Status.USED: "expired"}


def approval_conclude(approval_id) -> Concluded:
    decision_id = new_decision_id()
    try:
        with transaction.atomic():
            return _approval_conclude(approval_id, decision_id)
    except Exception as exc:  # noqa: BLE001 - any failure on the trusted side is a deny
        log.error("concluding approval %s failed: %s", approval_id, type(exc).__name__)
        return Concluded("expired", policy_error_answer(decision_id, "", ""))


def _approval_conclude(approval_id, decision_id: str) -> Concluded:
    approval = Approval.objects.select_related("run__worker", "decided_by").get(pk=approval_id)
    run, req = approval.run, approval.request
    status = WAIT_STATUS[approval.status]
    facts = req.get("facts", {})
    sentinel_ids = frozenset(facts.get("sentinel_secret_ids", ()))
    inject: tuple[dict, ...] = ()
    replace: tuple[dict, ...] = ()
    budget = None
    comment = None
    who = approval.decided_by.get_username() if approval.decided_by else "nobody"
    if approval.status == Approval.Status.REFUSED:
        comment = approval.comment or None
        decision = engine.deny(DenyReason.APPROVAL_REFUSED, f"refused by {who} via {approval.channel}"
                               + (f": {comment}" if comment else ""))
    elif approval.status != Approval.Status.APPROVED:
        decision = engine.deny(DenyReason.APPROVAL_EXPIRED, "the approval expired or was already used")
    elif not run.is_live or not run.worker.active:
        decision = engine.deny(DenyReason.BAD_TOKEN, "the run has ended")
    elif _no_longer_held(approval):
        # A waiter left behind by a gateway that gave up (its long-poll outlives the hold by up to a
        # poll): consuming here would spend the approval on a request nobody forwards. It is kept for
        # the identical retry within the grace instead, as if the gateway's abandon had come first.
        approval_abandon(approval.pk)
        status = "expired"
        decision = engine.deny(DenyReason.APPROVAL_EXPIRED, "the box stopped waiting before the approval; "
                               "the identical request passes once if retried within the grace period")
    elif not approval_consume(approval.pk, run.pk, held=True):
        status = "expired"
        decision = engine.deny(DenyReason.APPROVAL_EXPIRED,
                               "the approval was already used by another request")
    else:
        decision = _rejudge(approval, run, facts, sentinel_ids, who)
        if decision.verdict == Verdict.ALLOW:
            stored = facts.get("model_call")  # the held request's model-call facts, as stored
            allowed = allow(run, decision, decision_id, method=req["method"], url=req["url"],
                            host=facts["host"], sentinel_ids=sentinel_ids,
                            model_call=ModelCallFacts(**stored) if stored else None)
            decision, budget, inject, replace = (allowed.decision, allowed.budget, allowed.inject,
                                                 allowed.replace)
    audit_decision(decision, decision_id, run=run, method=req.get("method", ""), url=req.get("url", ""),
                   extra={"approval": str(approval.pk), "approved_by": who if status == "approved" else None,
                          "budget": budget})
    answer = EgressAnswer(decision, decision_id, budget=budget, inject=inject, replace=replace)
    return Concluded(status, answer, comment=comment)


def _no_longer_held(approval: Approval) -> bool:
    """The gateway said it stopped holding the request, or its hold (which starts after the decision
    that opened the approval, docs/wire.md) is over by the control plane's clock."""
    hold = approval_hold_seconds()
    return (approval.abandoned_at is not None
            or timezone.now() >= approval.created_at + timedelta(seconds=hold))


def _rejudge(approval: Approval, run: Run, facts: dict, sentinel_ids: frozenset[int], who: str):
    """Evaluate the approved request again against today's grants and taint: a grant removed, disabled,
    expired or outranked by a deny since the approval still denies. An ask for the approved grant is
    the approval's allow."""
    judged = request_facts(method=approval.request["method"], scheme=facts["scheme"], host=facts["host"],
                           port=facts["port"], path=facts["path"], mcp=facts.get("mcp", ()),
                           sentinel_ids=sentinel_ids, headers=_stored_headers(approval.request),
                           body_size=approval.request.get("body_size"))
    decision = engine.require_authentic(engine.evaluate(
        run_state(run), judged, grant_rules_for_worker(run.worker_id), timezone.now()))
    if decision.verdict == Verdict.ASK:
        if decision.grant.slug != approval.grant_slug:
            return engine.deny(DenyReason.NO_GRANT, "the grant this approval was for no longer matches")
        return engine.allow_approved(decision.grant, f"approved by {who} via {approval.channel}")
    return decision


def _stored_headers(snapshot: dict) -> list[tuple[str, str | None]]:
    """The held request's headers as its snapshot keeps them (the approval digest bound them). A masked
    value is not known: a header condition on it fails an allow and holds for a deny."""
    return [(name, None if value == MASK else value) for name, value in snapshot.get("headers") or ()]
