"""The audit records a decision writes: the decision itself, and a tripwire when the box sent a
sentinel where no grant covers it. Both name the request by its masked URL, never a secret value."""

from __future__ import annotations

from controlplane.audit.services import audit_write
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Run
from controlplane.policy import engine
from controlplane.policy.engine import DenyReason
from controlplane.vault.models import Secret
from controlplane.vault.redact import text_for_record


def audit_decision(decision: engine.Decision, decision_id: str, *, run: Run | None, method: str, url: str,
                   extra: dict) -> None:
    grant = decision.grant
    data = {"decision_id": decision_id, "method": method, "url": url, "grant": grant.slug if grant else None,
            "message": text_for_record(decision.message), "tripwire": decision.tripwire, **extra}
    if run is not None:
        data["taint"] = DataClass(run.taint).label
        data["untrusted"] = run.untrusted
    reason = str(decision.reason) if decision.reason else ""
    audit_write("decision", data, run=run, worker=run.worker if run else None,
                 verdict=str(decision.verdict), reason=reason)


def audit_connection(decision_id: str, run: Run, url: str) -> None:
    """A CONNECT without a tunnel grant is not refused: the gateway intercepts it and judges each request
    inside. It is recorded as the connection it is, never as a deny (one request, one record)."""
    audit_write("connection", {"decision_id": decision_id, "url": url, "intercepted": True},
                 run=run, worker=run.worker)


def intercepted_connect(scheme: str, decision: engine.Decision) -> bool:
    return (scheme == "tunnel" and decision.verdict == engine.Verdict.DENY and not decision.tripwire
            and decision.reason == DenyReason.NO_GRANT)


def audit_tripwire(decision_id: str, run: Run, url: str, grant_slug: str | None,
                   sentinel_ids: frozenset[int]) -> None:
    names = sorted(Secret.objects.filter(pk__in=sentinel_ids).values_list("name", flat=True))
    audit_write("tripwire", {"decision_id": decision_id, "url": url, "grant": grant_slug,
                              "sentinels_of": names}, run=run, verdict="deny", reason=DenyReason.TRIPWIRE)
