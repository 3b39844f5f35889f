"""The decision service behind the gateway API: resolve the run, evaluate the policy, then in ONE
transaction open the approval / pass a grace approval, reserve budget, reveal the matched grant's secret
and write the audit records. Any failure is a deny (policy_error); the floor is always closed."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from types import SimpleNamespace

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.approvals.services import (
    approval_consume,
    approval_consume_grace,
    approval_open,
    request_digest,
    request_snapshot,
)
from controlplane.audit.services import audit_append
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Run, RunDecision
from controlplane.fleet.selectors import live_run_for_token
from controlplane.fleet.services import run_raise_taint
from controlplane.ledger.services import reserve
from controlplane.ledger.types import OverBudget
from controlplane.policy import engine
from controlplane.policy.engine import DenyReason, Verdict
from controlplane.policy.models import Grant
from controlplane.vault.models import Secret
from controlplane.vault.redact import mcp_for_record, text_for_record, url_for_record
from controlplane.vault.services import secret_reveal, sentinel_secret_ids

log = logging.getLogger(__name__)

DENY_STATUS = {DenyReason.OVER_BUDGET: 402, DenyReason.BAD_TOKEN: 407, DenyReason.POLICY_ERROR: 503}
DEFAULT_DENY_STATUS = 403
SECRET_PLACEHOLDER = "{secret}"


@dataclass(frozen=True)
class EgressRequest:
    """The gateway's request facts (validated by the API schema)."""

    token: str
    method: str
    scheme: str
    host: str
    port: int
    path: str
    headers: Sequence[tuple[str, str]]
    body_size: int
    body_sha256: str
    body_preview: str
    mcp: Sequence[tuple[str, str | None]]

    @property
    def exact_url(self) -> str:
        """What an approval covers (its digest); the port is always explicit. Never written down."""
        host = self.host.lower()
        if self.scheme == "tunnel":
            return f"tunnel://{host}:{self.port}"
        return f"{self.scheme}://{host}:{self.port}{self.path}"

    @cached_property
    def url(self) -> str:
        """The URL as audit records, approvals and run decisions name it: sentinels and credential query
        values masked (controlplane.vault.redact). If masking fails, the path is left out altogether."""
        try:
            return url_for_record(self.exact_url)
        except Exception:  # noqa: BLE001 - also named by the policy-error path; never fall back to raw
            return f"{self.scheme}://{self.host.lower()}:{self.port}/[not recorded]"


def new_decision_id() -> str:
    return "dc_" + secrets.token_urlsafe(16)


# --- grants and secrets, cached per policy version ---
# Database triggers bump the version on every grant or secret change (fleet.PolicyVersion), and every
# decision reads it in the same query that resolves the token, so a cache hit is never stale.

_GRANT_COLUMNS = (
    "id", "slug", "worker_id", "methods", "schemes", "host", "port", "paths", "mcp_tools", "mode",
    "max_taint", "result_class", "untrusted", "expires_at", "secret_id", "secret__name", "inject_header",
    "inject_format", "cost_per_call", "tunnel", "trace", "enabled", "updated_at",
)
_compiled_rules: dict[str, engine.GrantRule] = {}


def _rule_from_row(row: tuple) -> engine.GrantRule:
    # Keyed on every column of the row: any edit, by any path, yields a new key and a fresh compile.
    key = repr(row)
    rule = _compiled_rules.get(key)
    if rule is None:
        fields = dict(zip(_GRANT_COLUMNS, row, strict=True))
        secret_name = fields.pop("secret__name")
        fields["secret"] = SimpleNamespace(name=secret_name) if fields["secret_id"] else None
        fields["pk"] = fields["id"]
        rule = engine.GrantRule.from_model(SimpleNamespace(**fields))
        if len(_compiled_rules) >= settings.ROSTER_GRANT_RULE_CACHE_SIZE:
            _compiled_rules.clear()
        _compiled_rules[key] = rule
    return rule


class _PolicyState:
    """Compiled grants per worker and secret rows (ciphertext, never plaintext) for one version."""

    def __init__(self, version: int | None):
        self.version = version
        self.rules: dict[int, list[engine.GrantRule]] = {}
        self.secrets: dict[int, Secret] = {}


_state = _PolicyState(None)


def _state_for(version: int | None) -> _PolicyState:
    global _state
    # Unknown version (counter row missing): never cache. Inside a transaction the reads may include
    # this transaction's own uncommitted writes, which a rollback would undo under the same number.
    if version is None or connection.in_atomic_block:
        return _PolicyState(None)
    current = _state
    if current.version != version:
        current = _PolicyState(version)
        _state = current  # one reference swap; readers holding the old state finish with it
    return current


def grant_rules_for_worker(worker_id: int, state: _PolicyState | None = None) -> list[engine.GrantRule]:
    state = state or _PolicyState(None)
    rules = state.rules.get(worker_id)
    if rules is None:
        rows = Grant.objects.filter(Q(worker_id=worker_id) | Q(worker__isnull=True), enabled=True)
        rules = [_rule_from_row(row) for row in rows.values_list(*_GRANT_COLUMNS)]
        state.rules[worker_id] = rules
    return rules


def _secret(secret_id: int, state: _PolicyState) -> Secret:
    secret = state.secrets.get(secret_id)
    if secret is None:
        secret = Secret.objects.only("id", "name", "sentinel", "ciphertext").get(pk=secret_id)
        state.secrets[secret_id] = secret
    return secret


# --- answers ---

def _status(decision: engine.Decision) -> int:
    if decision.verdict != Verdict.DENY:
        return 200
    return DENY_STATUS.get(decision.reason, DEFAULT_DENY_STATUS)


def _answer(decision: engine.Decision, decision_id: str, *, approval: Approval | None = None,
            budget: dict | None = None, inject: Sequence[dict] = (), replace: Sequence[dict] = ()) -> dict:
    allowed = decision.verdict == Verdict.ALLOW
    grant = decision.grant
    return {
        "verdict": str(decision.verdict),
        "reason": str(decision.reason) if decision.reason else None,
        "status": _status(decision),
        "message": decision.message,
        "decision_id": decision_id,
        "grant": grant.slug if grant else None,
        "tunnel": bool(allowed and grant.tunnel),
        "trace": bool(allowed and grant.trace),
        "inject": list(inject) if allowed else [],
        "replace": list(replace) if allowed else [],
        "approval_id": str(approval.pk) if approval else None,
        "hold_seconds": _hold_seconds() if approval else 0,
        "budget": budget,
    }


def _hold_seconds() -> int:
    return min(settings.ROSTER_APPROVAL_HOLD_SECONDS, settings.ROSTER_APPROVAL_TTL_SECONDS)


def _audit_decision(decision: engine.Decision, decision_id: str, *, run: Run | None, method: str, url: str,
                    extra: dict) -> None:
    grant = decision.grant
    data = {"decision_id": decision_id, "method": method, "url": url, "grant": grant.slug if grant else None,
            "message": text_for_record(decision.message), "tripwire": decision.tripwire, **extra}
    if run is not None:
        data["taint"] = DataClass(run.taint).label
        data["untrusted"] = run.untrusted
    reason = str(decision.reason) if decision.reason else ""
    audit_append("decision", data, run=run, worker=run.worker if run else None,
                 verdict=str(decision.verdict), reason=reason)


def _audit_tripwire(decision_id: str, run: Run, url: str, grant_slug: str | None,
                    sentinel_ids: frozenset[int]) -> None:
    names = sorted(Secret.objects.filter(pk__in=sentinel_ids).values_list("name", flat=True))
    audit_append("tripwire", {"decision_id": decision_id, "url": url, "grant": grant_slug,
                              "sentinels_of": names}, run=run, verdict="deny", reason=DenyReason.NO_GRANT)


# --- allow: budget, outcome record, credentials ---

def _credentials(run: Run, grant: engine.GrantRule, decision_id: str, host: str,
                 sentinel_ids: frozenset[int], state: _PolicyState) -> tuple[list[dict], list[dict]]:
    """Secret values for the matched grant's secret only; none for tunnels (nothing is intercepted)."""
    if grant.secret_id is None or grant.tunnel:
        return [], []
    secret = _secret(grant.secret_id, state)
    value = secret_reveal(secret)
    inject = []
    if grant.inject_header:
        template = grant.inject_format or SECRET_PLACEHOLDER
        # str.replace, not str.format: a grant's format string must not reach attributes of anything.
        inject.append({"header": grant.inject_header.lower(),
                       "value": template.replace(SECRET_PLACEHOLDER, value)})
    named = grant.secret_id in sentinel_ids
    # An injection carries its sentinel pair too: the gateway swaps only sentinels it finds, and needs the
    # pair to scrub echoes of the injected value from the response (docs/wire.md).
    replace = [{"sentinel": secret.sentinel, "value": value}] if (named or inject) else []
    if inject or replace:
        audit_append("credential_use", {"decision_id": decision_id, "secret": secret.name,
                                        "grant": grant.slug, "host": host, "inject": bool(inject),
                                        "replace": named}, run=run)
    return inject, replace


_INSERT_RUN_DECISION = (
    f"INSERT INTO {RunDecision._meta.db_table} (decision_id, run_id, grant_slug, result_class, untrusted, "
    "trace, method, url, created_at, traced, secret_name) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")


def _allow(run: Run, decision: engine.Decision, decision_id: str, *, method: str, url: str, host: str,
           sentinel_ids: frozenset[int], state: _PolicyState | None = None,
           ) -> tuple[engine.Decision, dict | None, list[dict], list[dict]]:
    grant = decision.grant
    reserved = reserve(worker=run.worker, run=run, grant_slug=grant.slug, decision_id=decision_id,
                       cost_micro=int(grant.cost_per_call), origin=run.origin)
    if isinstance(reserved, OverBudget):
        return engine.deny(DenyReason.OVER_BUDGET, reserved.message), reserved.as_dict(), [], []
    with connection.cursor() as cur:  # plain SQL: the ORM's create() costs more than the insert
        cur.execute(_INSERT_RUN_DECISION, [
            decision_id, run.pk, grant.slug, int(grant.result_class), bool(grant.untrusted),
            bool(grant.trace), method, url, connection.ops.adapt_datetimefield_value(timezone.now()), False,
            _handed_secret_name(grant)])
    _raise_taint_for_result(run, grant)
    inject, replace = _credentials(run, grant, decision_id, host, sentinel_ids, state or _PolicyState(None))
    return decision, None, inject, replace


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


# --- /decide ---

def _facts(req: EgressRequest, sentinel_ids: frozenset[int]) -> engine.RequestFacts:
    return engine.RequestFacts(
        method=req.method, scheme=req.scheme, host=req.host, port=req.port, path=req.path,
        mcp=tuple(engine.McpCall(method=m, tool=t) for m, t in req.mcp), sentinel_secret_ids=sentinel_ids,
    )


def _run_state(run: Run) -> engine.RunState:
    return engine.RunState(run_id=run.pk, worker_id=run.worker_id, taint=DataClass(run.taint),
                           untrusted=run.untrusted)


def decide(req: EgressRequest) -> dict:
    decision_id = new_decision_id()
    try:
        return _decide(req, decision_id)
    except Exception as exc:  # noqa: BLE001 - any failure on the trusted side is a deny
        # The exception type only: messages and tracebacks can carry request data.
        log.error("decision %s failed: %s", decision_id, type(exc).__name__)
        return policy_error_answer(decision_id, req.method, req.url)


def policy_error_answer(decision_id: str, method: str, url: str) -> dict:
    decision = engine.deny(DenyReason.POLICY_ERROR, "the control plane could not decide this request")
    try:
        with transaction.atomic():
            _audit_decision(decision, decision_id, run=None, method=method, url=url, extra={})
    except Exception as exc:  # noqa: BLE001 - still a deny, even when the audit cannot be written
        log.error("could not audit policy error %s: %s", decision_id, type(exc).__name__)
    return _answer(decision, decision_id)


def _bad_token(req: EgressRequest, decision_id: str) -> dict:
    decision = engine.deny(DenyReason.BAD_TOKEN, "missing or unknown run token, or the run has ended")
    _audit_decision(decision, decision_id, run=None, method=req.method, url=req.url,
                    extra={"token_present": bool(req.token)})
    return _answer(decision, decision_id)


def _same_footing(before: Run, after: Run) -> bool:
    return (before.pk, before.status, before.taint, before.untrusted, before.policy_version) == (
        after.pk, after.status, after.taint, after.untrusted, after.policy_version)


def _decide(req: EgressRequest, decision_id: str) -> dict:
    run = live_run_for_token(req.token, with_policy_version=True)
    if run is None:
        with transaction.atomic():
            return _bad_token(req, decision_id)
    # Evaluated outside the transaction, so the compiled grants may come from (and go into) the cache.
    state = _state_for(run.policy_version)
    sentinel_ids = frozenset(sentinel_secret_ids([value for _, value in req.headers] + [req.path]))
    facts = _facts(req, sentinel_ids)
    now = timezone.now()
    decision = engine.require_authentic(engine.evaluate(
        _run_state(run), facts, grant_rules_for_worker(run.worker_id, state), now))
    with transaction.atomic():
        # Re-read inside the write transaction: a run that ended, a taint raised or a grant revoked
        # since the first read is decided again on the current state, never on the stale one.
        current = live_run_for_token(req.token, with_policy_version=True)
        if current is None:
            return _bad_token(req, decision_id)
        if not _same_footing(run, current):
            run, state = current, _PolicyState(None)
            decision = engine.require_authentic(engine.evaluate(
                _run_state(run), facts, grant_rules_for_worker(run.worker_id, state), now))
        return _commit_decision(run, req, decision, decision_id, sentinel_ids, now, state)


def _commit_decision(run: Run, req: EgressRequest, decision: engine.Decision, decision_id: str,
                     sentinel_ids: frozenset[int], now: datetime, state: _PolicyState) -> dict:
    approval = granted = budget = None
    inject: list[dict] = []
    replace: list[dict] = []
    if decision.verdict == Verdict.ASK:
        digest = request_digest(req.method, req.exact_url, req.body_sha256)
        granted = approval_consume_grace(run.pk, digest, decision.grant.slug, now)
        if granted is not None:
            decision = engine.allow_approved(
                decision.grant, f"approved before ({granted.pk}); this identical request passes once"
            )
        else:
            approval = approval_open(run=run, grant_id=decision.grant.id, grant_slug=decision.grant.slug,
                                     snapshot=_snapshot(req, sentinel_ids), now=now, digest=digest)
    if decision.verdict == Verdict.ALLOW:
        decision, budget, inject, replace = _allow(run, decision, decision_id, method=req.method, url=req.url,
                                                   host=req.host, sentinel_ids=sentinel_ids, state=state)
    _audit_decision(decision, decision_id, run=run, method=req.method, url=req.url, extra={
        "body_sha256": req.body_sha256, "body_size": req.body_size, "mcp": mcp_for_record(req.mcp),
        "approval": str((approval or granted).pk) if (approval or granted) else None, "budget": budget,
    })
    if decision.tripwire:
        slug = decision.grant.slug if decision.grant else None
        _audit_tripwire(decision_id, run, req.url, slug, sentinel_ids)
    return _answer(decision, decision_id, approval=approval, budget=budget, inject=inject, replace=replace)


def _snapshot(req: EgressRequest, sentinel_ids: frozenset[int]) -> dict:
    sentinels = frozenset(Secret.objects.filter(pk__in=sentinel_ids).values_list("sentinel", flat=True))
    snapshot = request_snapshot(method=req.method, url=req.exact_url, headers=list(req.headers),
                                body_preview=req.body_preview, body_sha256=req.body_sha256,
                                body_size=req.body_size, sentinels=sentinels)
    # What the approved request is re-judged on when the gateway collects the approval.
    # Stored, so masked like the URL: the query is never matched, and a mask stays inside its segment.
    snapshot["facts"] = {"scheme": req.scheme, "host": req.host, "port": req.port,
                         "path": url_for_record(req.path, sentinels), "mcp": mcp_for_record(req.mcp),
                         "sentinel_secret_ids": sorted(sentinel_ids)}
    return snapshot


# --- /approvals/{id}/wait: the approval has left "pending"; turn it into the final decision ---

WAIT_STATUS = {Approval.Status.APPROVED: "approved", Approval.Status.REFUSED: "refused",
               Approval.Status.EXPIRED: "expired", Approval.Status.USED: "expired"}


def approval_conclude(approval_id) -> dict:
    decision_id = new_decision_id()
    try:
        with transaction.atomic():
            return _approval_conclude(approval_id, decision_id)
    except Exception as exc:  # noqa: BLE001 - any failure on the trusted side is a deny
        log.error("concluding approval %s failed: %s", approval_id, type(exc).__name__)
        return {"status": "expired", "decision": policy_error_answer(decision_id, "", "")}


def _approval_conclude(approval_id, decision_id: str) -> dict:
    approval = Approval.objects.select_related("run__worker", "decided_by").get(pk=approval_id)
    run, req = approval.run, approval.request
    status = WAIT_STATUS[approval.status]
    facts = req.get("facts", {})
    sentinel_ids = frozenset(facts.get("sentinel_secret_ids", ()))
    inject: list[dict] = []
    replace: list[dict] = []
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
    elif not approval_consume(approval.pk, run.pk):
        status = "expired"
        decision = engine.deny(DenyReason.APPROVAL_EXPIRED,
                               "the approval was already used by another request")
    else:
        decision = _rejudge(approval, run, facts, sentinel_ids, who)
        if decision.verdict == Verdict.ALLOW:
            decision, budget, inject, replace = _allow(run, decision, decision_id, method=req["method"],
                                                       url=req["url"], host=facts["host"],
                                                       sentinel_ids=sentinel_ids)
    _audit_decision(decision, decision_id, run=run, method=req.get("method", ""), url=req.get("url", ""),
                    extra={"approval": str(approval.pk), "approved_by": who if status == "approved" else None,
                           "budget": budget})
    return {"status": status, "comment": comment,
            "decision": _answer(decision, decision_id, budget=budget, inject=inject, replace=replace)}


def _rejudge(approval: Approval, run: Run, facts: dict, sentinel_ids: frozenset[int], who: str):
    """Evaluate the approved request again against today's grants and taint: a grant removed, disabled,
    expired or outranked by a deny since the approval still denies. An ask for the approved grant is
    the approval's allow."""
    request_facts = engine.RequestFacts(
        method=approval.request["method"], scheme=facts["scheme"], host=facts["host"], port=facts["port"],
        path=facts["path"], mcp=tuple(engine.McpCall(method=m, tool=t) for m, t in facts.get("mcp", ())),
        sentinel_secret_ids=sentinel_ids,
    )
    decision = engine.require_authentic(engine.evaluate(
        _run_state(run), request_facts, grant_rules_for_worker(run.worker_id), timezone.now()))
    if decision.verdict == Verdict.ASK:
        if decision.grant.slug != approval.grant_slug:
            return engine.deny(DenyReason.NO_GRANT, "the grant this approval was for no longer matches")
        return engine.allow_approved(decision.grant, f"approved by {who} via {approval.channel}")
    return decision

