"""Deciding one egress request: resolve the run, evaluate the policy, then in ONE transaction open the
approval / pass a grace approval, reserve budget, reveal the matched grant's secret and write the audit
records. Any failure is a deny (policy_error); the floor is always closed."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from controlplane.approvals.services import (
    approval_consume_grace,
    approval_open,
    approval_window_match,
    request_digest,
    request_snapshot,
)
from controlplane.audit.services import lock_chain_head
from controlplane.core.db import in_transaction
from controlplane.core.taint import DataClass
from controlplane.egress.allow import allow
from controlplane.egress.answer import EgressAnswer
from controlplane.egress.db_thread import groupable, in_group
from controlplane.egress.policy_cache import PolicyState, grant_rules_for_worker, state_for
from controlplane.egress.records import (
    audit_connection,
    audit_decision,
    audit_tripwire,
    intercepted_connect,
)
from controlplane.egress.request import EgressRequest, new_decision_id
from controlplane.fleet.models import Run
from controlplane.fleet.selectors import live_run_for_token
from controlplane.fleet.tokens import token_address_problem
from controlplane.ledger.services import budget_refusal
from controlplane.policy import engine
from controlplane.policy.engine import DenyReason, Verdict
from controlplane.vault.models import Secret
from controlplane.vault.redact import mcp_for_record, url_for_record
from controlplane.vault.services import sentinel_secret_ids

log = logging.getLogger(__name__)


def run_state(run: Run) -> engine.RunState:
    return engine.RunState(run_id=run.pk, worker_id=run.worker_id, taint=DataClass(run.taint),
                           untrusted=run.untrusted)


def _judge_before_the_lock(req: EgressRequest, may_wait: bool = False) -> tuple:
    """The arguments decide() is called with in a group, judged first, before the group takes the chain's
    lock (controlplane.egress.db_thread runs this outside any transaction): the token's run, the policy's
    verdict on the request and its facts. Under the lock the group's decision re-reads the run and uses
    this judgement only on the same footing; anything that fails here is left to be judged there."""
    try:
        return req, may_wait, _judged_outside(req)[0]
    except Exception as exc:  # noqa: BLE001 - judged again under the lock, where a failure is a deny
        log.warning("judging before the lock failed (%s); judged under it", type(exc).__name__)
        return req, may_wait, None


@groupable(prepare=_judge_before_the_lock)
def decide(req: EgressRequest, may_wait: bool = False, judged: Judged | None = None) -> EgressAnswer:
    """Decide one egress request. Alone, any failure is a deny (policy_error). In a group of decisions
    (controlplane.egress.db_thread) any failure raises instead: the group rolls back, and this request is
    decided again alone. `may_wait`: the caller waits for calls in flight rather than have this one refused
    because they hold the budget's remainder; such an answer is `budget_held` and recorded nowhere.
    `judged`: in a group, the judgement made before the lock (_judge_before_the_lock)."""
    decision_id = new_decision_id()
    if in_group():
        return _decide(req, decision_id, grouped=True, may_wait=may_wait, judged=judged)
    try:
        return _decide(req, decision_id, grouped=False, may_wait=may_wait)
    except Exception as exc:  # noqa: BLE001 - any failure on the trusted side is a deny
        # The exception type only: messages and tracebacks can carry request data.
        log.error("decision %s failed: %s", decision_id, type(exc).__name__)
        return policy_error_answer(decision_id, req.method, req.url)


def policy_error_answer(decision_id: str, method: str, url: str) -> EgressAnswer:
    decision = engine.deny(DenyReason.POLICY_ERROR, "the control plane could not decide this request")
    try:
        with transaction.atomic():
            audit_decision(decision, decision_id, run=None, method=method, url=url, extra={})
    except Exception as exc:  # noqa: BLE001 - still a deny, even when the audit cannot be written
        log.error("could not audit policy error %s: %s", decision_id, type(exc).__name__)
    return EgressAnswer(decision, decision_id)


def _bad_token(req: EgressRequest, decision_id: str, refused: tuple[Run, str] | None = None) -> EgressAnswer:
    """Refused for its token. `refused`: the known run whose token was presented from an address not its
    box's, and the words why: on the audit record (naming the run) only; the caller is told no more than
    for an unknown token."""
    decision = engine.deny(DenyReason.BAD_TOKEN, "missing or unknown run token, the run has ended, or the "
                                                 "token was presented from outside its box")
    extra = {"token_present": bool(req.token)}
    if refused is not None:
        extra["detail"] = refused[1]
    audit_decision(decision, decision_id, run=refused[0] if refused else None, method=req.method, url=req.url,
                   extra=extra)
    return EgressAnswer(decision, decision_id)


def _run_for_token(req: EgressRequest) -> tuple[Run | None, tuple[Run, str] | None]:
    """The live run the token belongs to if it came from that run's box; else None and, for a known run's
    token presented from elsewhere, that run and why. One read: the box's address comes with the run."""
    run = live_run_for_token(req.token, with_policy_version=True)
    if run is None:
        return None, None
    problem = token_address_problem(req.client, run.box_address)
    return (None, (run, problem)) if problem else (run, None)


def _same_footing(before: Run, after: Run) -> bool:
    """Whether a judgement made on `before` still stands for `after`, the run as read under the lock. An
    unknown policy version (its counter row missing) never vouches for unchanged grants."""
    if before.policy_version is None or after.policy_version is None:
        return False
    return (before.pk, before.status, before.taint, before.untrusted, before.policy_version) == (
        after.pk, after.status, after.taint, after.untrusted, after.policy_version)


@dataclass(frozen=True)
class Judged:
    """The policy's verdict on a request for its run as read then, with what it was judged on."""

    run: Run
    state: PolicyState
    sentinel_ids: frozenset[int]
    now: datetime
    decision: engine.Decision


def _judge(req: EgressRequest, run: Run, state: PolicyState, sentinel_ids: frozenset[int] | None = None,
           now: datetime | None = None) -> Judged:
    sentinel_ids = _sentinel_ids(req) if sentinel_ids is None else sentinel_ids
    now = now or timezone.now()
    decision = engine.require_authentic(engine.evaluate(
        run_state(run), req.facts(sentinel_ids), grant_rules_for_worker(run.worker_id, state), now))
    return Judged(run, state, sentinel_ids, now, decision)


def _judged_outside(req: EgressRequest) -> tuple[Judged | None, tuple[Run, str] | None]:
    """Judged outside any transaction, so the compiled grants may come from (and go into) the cache; None
    for a token that names no live run from its box, with _run_for_token's why (that refusal is made, and
    recorded, in a transaction of its own or under the group's lock)."""
    run, refused = _run_for_token(req)
    return (None, refused) if run is None else (_judge(req, run, state_for(run.policy_version)), None)


def _decide(req: EgressRequest, decision_id: str, *, grouped: bool, may_wait: bool = False,
            judged: Judged | None = None) -> EgressAnswer:
    if grouped and judged is None:
        # Nothing judged before the lock: the run read once, inside the group's transaction, which holds
        # the chain's lock and writes no grant or secret, so the cache serves it too.
        run, refused = _run_for_token(req)
        if run is None:
            return _bad_token(req, decision_id, refused)
        state = state_for(run.policy_version, policy_unwritten=True)
        return _commit(req, decision_id, _judge(req, run, state), may_wait)
    if grouped:
        return _on_current_footing(req, decision_id, judged, may_wait, grouped=True)
    judged, refused = _judged_outside(req)
    if judged is None:
        with in_transaction():
            return _bad_token(req, decision_id, refused)
    with transaction.atomic():
        lock_chain_head()
        return _on_current_footing(req, decision_id, judged, may_wait, grouped=False)


def _on_current_footing(req: EgressRequest, decision_id: str, judged: Judged, may_wait: bool, *,
                        grouped: bool) -> EgressAnswer:
    """Under the chain's lock (held by whichever decision API process appends now): the run read again. A
    run that ended, a taint raised (by this group's earlier decisions too) or a grant revoked since the
    judgement is judged again on the current state, never decided on the stale one."""
    current, refused = _run_for_token(req)
    if current is None:
        return _bad_token(req, decision_id, refused)
    if not _same_footing(judged.run, current):
        # In a group the cache is sound under the lock (see above); alone, inside this transaction, not.
        state = state_for(current.policy_version, policy_unwritten=True) if grouped else PolicyState(None)
        judged = _judge(req, current, state, judged.sentinel_ids, judged.now)
    return _commit(req, decision_id, judged, may_wait)


def _commit(req: EgressRequest, decision_id: str, judged: Judged, may_wait: bool) -> EgressAnswer:
    return _commit_decision(judged.run, req, judged.decision, decision_id, judged.sentinel_ids, judged.now,
                            judged.state, may_wait)


def _sentinel_ids(req: EgressRequest) -> frozenset[int]:
    return frozenset(sentinel_secret_ids([value for _, value in req.headers] + [req.path]
                                         + list(req.sentinels)))


def _commit_decision(run: Run, req: EgressRequest, decision: engine.Decision, decision_id: str,
                     sentinel_ids: frozenset[int], now: datetime, state: PolicyState,
                     may_wait: bool = False) -> EgressAnswer:
    approval = granted = budget = window = None
    # Only a plain allow may come back undecided to wait for budget: the reservation is then its first
    # write, so nothing is left behind (an ask has consumed a grace approval or opened one by then).
    may_wait = may_wait and decision.verdict == Verdict.ALLOW
    inject: tuple[dict, ...] = ()
    replace: tuple[dict, ...] = ()
    if decision.verdict == Verdict.ASK:
        digest = request_digest(req.method, req.exact_url, req.body_sha256, req.headers)
        granted = approval_consume_grace(run.pk, digest, decision.grant.slug, now)
        window = None if granted else approval_window_match(run.worker_id, digest, decision.grant.slug, now)
        if granted is not None:
            decision = engine.allow_approved(
                decision.grant, f"approved before ({granted.pk}); this identical request passes once"
            )
        elif window is not None:
            # A time-boxed approval: the approver's decision, named on this allow's record.
            granted = window
            who = window.decided_by.get_username() if window.decided_by_id else "an approver"
            decision = engine.allow_approved(
                decision.grant, f"identical requests allowed by {who} until {window.window_until.isoformat()}"
                                f" (time-boxed approval {window.pk})")
        elif (over := budget_refusal(run.worker, int(decision.grant.cost_per_call), req.model_call)):
            # Over budget already: a person's yes would be refused by the cap, so nobody is asked.
            decision = engine.deny(DenyReason.OVER_BUDGET, f"{over.message}; not put to an approver: "
                                                           "approving could not let it through")
            budget = over.as_dict()
        else:
            approval = approval_open(run=run, grant_id=decision.grant.id, grant_slug=decision.grant.slug,
                                     snapshot=_snapshot(req, sentinel_ids), now=now, digest=digest)
    if decision.verdict == Verdict.ALLOW:
        allowed = allow(run, decision, decision_id, method=req.method, url=req.url, host=req.host,
                        sentinel_ids=sentinel_ids, state=state, model_call=req.model_call,
                        may_wait=may_wait)
        if allowed.held:
            return EgressAnswer(allowed.decision, decision_id, budget=allowed.budget, budget_held=True)
        decision, budget, inject, replace = allowed.decision, allowed.budget, allowed.inject, allowed.replace
    if intercepted_connect(req.scheme, decision):
        audit_connection(decision_id, run, req.url)
        return EgressAnswer(decision, decision_id)
    audit_decision(decision, decision_id, run=run, method=req.method, url=req.url, extra={
        "body_sha256": req.body_sha256, "body_size": req.body_size, "mcp": mcp_for_record(req.mcp),
        "approval": str((approval or granted).pk) if (approval or granted) else None, "budget": budget,
        **({"approval_window_until": window.window_until.isoformat()} if window else {}),
    })
    if decision.tripwire:
        slug = decision.grant.slug if decision.grant else None
        audit_tripwire(decision_id, run, req.url, slug, sentinel_ids)
    return EgressAnswer(decision, decision_id, approval_id=str(approval.pk) if approval else None,
                        budget=budget, inject=inject, replace=replace)


def _snapshot(req: EgressRequest, sentinel_ids: frozenset[int]) -> dict:
    sentinels = frozenset(Secret.objects.filter(pk__in=sentinel_ids).values_list("sentinel", flat=True))
    snapshot = request_snapshot(method=req.method, url=req.exact_url, headers=list(req.headers),
                                body_preview=req.body_preview, body_sha256=req.body_sha256,
                                body_size=req.body_size, sentinels=sentinels)
    # What the approved request is re-judged on when the gateway collects the approval.
    # Stored, so masked like the URL: the query is never matched, and a mask stays inside its segment.
    snapshot["facts"] = {"scheme": req.scheme, "host": req.host, "port": req.port,
                         "path": url_for_record(req.path, sentinels), "mcp": mcp_for_record(req.mcp),
                         "sentinel_secret_ids": sorted(sentinel_ids),
                         "model_call": asdict(req.model_call) if req.model_call else None}
    return snapshot
