"""What an allow does, in the decision's transaction: reserve budget, write the run decision the
outcome will settle, raise the run's taint for the result, and hand over the matched grant's secret."""

from __future__ import annotations

from dataclasses import dataclass, field

from controlplane.audit.services import audit_write
from controlplane.egress.policy_cache import PolicyState, secret_row
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_raise_taint
from controlplane.fleet.sql import run_decision_insert
from controlplane.ledger.services import reserve
from controlplane.ledger.types import ModelCallFacts, OverBudget
from controlplane.policy import engine
from controlplane.policy.engine import DenyReason
from controlplane.vault.services import secret_reveal

SECRET_PLACEHOLDER = "{secret}"


@dataclass(frozen=True)
class Allowed:
    """The allow as it stands after budget: still an allow, or over_budget (with the cap in `budget`).
    `held`: refused only because calls in flight hold the cap's remainder, and the caller may wait for them
    (nothing was written then: the decision is to be made again, not recorded)."""

    decision: engine.Decision
    budget: dict | None = None
    inject: tuple[dict, ...] = field(default=(), repr=False)
    replace: tuple[dict, ...] = field(default=(), repr=False)
    held: bool = False


def allow(run: Run, decision: engine.Decision, decision_id: str, *, method: str, url: str, host: str,
          sentinel_ids: frozenset[int], state: PolicyState | None = None,
          model_call: ModelCallFacts | None = None, may_wait: bool = False) -> Allowed:
    """`model_call`: a model call's facts; its worst case is reserved in tokens and money beside the rest.
    `may_wait`: the caller writes nothing before this and can wait for calls in flight to settle
    (controlplane.egress.budget_wait), so a remainder that is only held comes back as `held`."""
    grant = decision.grant
    reserved = reserve(worker=run.worker, run=run, grant_slug=grant.slug, decision_id=decision_id,
                       cost_micro=int(grant.cost_per_call), origin=run.origin, model_call=model_call,
                       run_decision_follows=True)
    if isinstance(reserved, OverBudget):
        return Allowed(engine.deny(DenyReason.OVER_BUDGET, reserved.message), reserved.as_dict(),
                       held=may_wait and reserved.waitable)
    run_decision_insert(decision_id=decision_id, run_id=run.pk, grant_slug=grant.slug,
                        result_class=int(grant.result_class), untrusted=bool(grant.untrusted),
                        trace=bool(grant.trace), method=method, url=url,
                        secret_name=_handed_secret_name(grant))
    _raise_taint_for_result(run, grant)
    inject, replace = _credentials(run, grant, decision_id, host, url, sentinel_ids,
                                   state or PolicyState(None))
    return Allowed(decision, None, inject=inject, replace=replace)


def _credentials(run: Run, grant: engine.GrantRule, decision_id: str, host: str, url: str,
                 sentinel_ids: frozenset[int],
                 state: PolicyState) -> tuple[tuple[dict, ...], tuple[dict, ...]]:
    """Secret values for the matched grant's secret only; none for tunnels (nothing is intercepted)."""
    if grant.secret_id is None or grant.tunnel:
        return (), ()
    secret = secret_row(grant.secret_id, state)
    value = secret_reveal(secret)
    inject = ()
    if grant.inject_header:
        template = grant.inject_format or SECRET_PLACEHOLDER
        # str.replace, not str.format: a grant's format string must not reach attributes of anything.
        inject = ({"header": grant.inject_header.lower(),
                   "value": template.replace(SECRET_PLACEHOLDER, value)},)
    named = grant.secret_id in sentinel_ids
    # An injection carries its sentinel pair too: the gateway swaps only sentinels it finds, and needs the
    # pair to scrub echoes of the injected value from the response (docs/wire.md).
    replace = ({"sentinel": secret.sentinel, "value": value},) if (named or inject) else ()
    if inject or replace:
        audit_write("credential_use", {"decision_id": decision_id, "secret": secret.name,
                                        "grant": grant.slug, "host": host, "url": url,
                                        "inject": bool(inject),
                                        "replace": named}, run=run)
    return inject, replace


def _handed_secret_name(grant: engine.GrantRule) -> str:
    """The secret whose value this allow may hand the gateway (see _credentials); "" for none."""
    if grant.secret_id is None or grant.tunnel:
        return ""
    return grant.secret_name or ""


def _raise_taint_for_result(run: Run, grant: engine.GrantRule) -> None:
    """Raise the run's taint / untrusted flag now, in the decision's transaction: the allowed call's
    result is assumed to arrive (even if the call then fails), so the run's next decision, however soon,
    is judged on it and nothing waits for /outcome. `run` was read inside this transaction and taint
    only ever rises, so a run already at or above the grant's level needs no write."""
    wanted, untrusted = int(grant.result_class), bool(grant.untrusted)
    if run.taint >= wanted and (run.untrusted or not untrusted):
        return
    # `run` itself keeps the taint this decision was judged on: that is what its audit record names.
    run_raise_taint(run.pk, wanted, untrusted)
