"""The control plane's answers, parsed strictly (docs/wire.md). Anything unexpected is a WireError,
which the gateway turns into a deny: any doubt on the trusted side is a deny."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from roster_gateway.provider_errors import WIRES

VERDICTS = frozenset({"allow", "deny", "ask"})
DENY_STATUSES = frozenset({402, 403, 407, 503})
MAX_COMMENT = 2048


class WireError(Exception):
    """The control plane answered something the gateway does not understand."""


@dataclass(frozen=True)
class WireDecision:
    """The control plane's decision as the gateway read it off the wire (/decide, an approval wait): named
    apart from the policy engine's Decision and the decision service's EgressAnswer it was made from."""

    verdict: str
    reason: str | None
    status: int
    message: str
    decision_id: str
    grant: str | None
    tunnel: bool = False
    trace: bool = False
    inject: tuple[tuple[str, str], ...] = ()
    replace: tuple[tuple[str, str], ...] = ()
    approval_id: str | None = None
    hold_seconds: int = 0
    budget: dict | None = field(default=None, compare=False)
    # An approver's comment with a refusal (wait answers only; optional on the wire).
    comment: str | None = None
    # Journal this model call's request and response, each body bounded by this many bytes (0: not
    # journaled; the grant's `journal` switch and ROSTER_JOURNAL_MAX_BODY_BYTES, docs/journal.md).
    journal_max_bytes: int = 0
    # The model wire format the control plane says the request's host speaks ("" unknown): only the
    # shape of a refusal's body depends on it (roster_gateway.provider_errors).
    wire: str = ""

    def __repr__(self) -> str:  # never print inject/replace values (they are secrets)
        return (f"WireDecision({self.verdict}, reason={self.reason}, grant={self.grant}, "
                f"id={self.decision_id}, inject={len(self.inject)}, replace={len(self.replace)})")


def _str(doc: dict, key: str, *, optional: bool = False) -> str | None:
    value = doc.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise WireError(f"{key} is not a string")
    return value


def _bool(doc: dict, key: str) -> bool:
    value = doc.get(key, False)
    if not isinstance(value, bool):
        raise WireError(f"{key} is not a boolean")
    return value


def _int(doc: dict, key: str, default: int = 0) -> int:
    value = doc.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireError(f"{key} is not an integer")
    return value


def _pairs(doc: dict, key: str, a: str, b: str) -> tuple[tuple[str, str], ...]:
    items = doc.get(key) or []
    if not isinstance(items, list):
        raise WireError(f"{key} is not a list")
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get(a), str) or not isinstance(item.get(b), str):
            raise WireError(f"{key} entry is malformed")
        if not item[a]:
            raise WireError(f"{key} entry has an empty {a}")
        out.append((item[a], item[b]))
    return tuple(out)


def _wire(doc: dict) -> str:
    """A known wire format, or "": a format this gateway does not know yet only loses the provider's
    error shape of a refusal, so it is not worth refusing the decision for."""
    wire = _str(doc, "wire", optional=True) or ""
    return wire if wire in WIRES else ""


def parse_decision(doc: object) -> WireDecision:
    if not isinstance(doc, dict):
        raise WireError("decision is not an object")
    verdict = _str(doc, "verdict")
    if verdict not in VERDICTS:
        raise WireError(f"unknown verdict {verdict!r}")
    decision = WireDecision(
        verdict=verdict,
        reason=_str(doc, "reason", optional=True),
        status=_int(doc, "status", 200),
        message=_str(doc, "message", optional=True) or "",
        decision_id=_str(doc, "decision_id", optional=True) or "",
        grant=_str(doc, "grant", optional=True),
        tunnel=_bool(doc, "tunnel"),
        trace=_bool(doc, "trace"),
        inject=_pairs(doc, "inject", "header", "value"),
        replace=_pairs(doc, "replace", "sentinel", "value"),
        approval_id=_str(doc, "approval_id", optional=True),
        hold_seconds=_int(doc, "hold_seconds"),
        budget=doc.get("budget") if isinstance(doc.get("budget"), dict) else None,
        wire=_wire(doc),
        journal_max_bytes=_int(doc, "journal_max_bytes"),
    )
    if decision.journal_max_bytes < 0:
        raise WireError("journal_max_bytes is negative")
    if verdict == "deny":
        if not decision.reason:
            raise WireError("deny without a reason")
        if decision.inject or decision.replace or decision.tunnel:
            raise WireError("deny carrying secrets or a tunnel")
    elif verdict == "allow":
        if not decision.decision_id:
            raise WireError("allow without a decision_id")
    else:  # ask
        if not decision.approval_id:
            raise WireError("ask without an approval_id")
        if decision.inject or decision.replace:
            raise WireError("ask carrying secrets")
    return decision


@dataclass(frozen=True)
class ApprovalWait:
    status: str  # pending | approved | refused | expired
    decision: WireDecision | None


def parse_wait(doc: object) -> ApprovalWait:
    if not isinstance(doc, dict):
        raise WireError("approval answer is not an object")
    status = doc.get("status")
    if status not in ("pending", "approved", "refused", "expired"):
        raise WireError(f"unknown approval status {status!r}")
    raw = doc.get("decision")
    decision = parse_decision(raw) if raw is not None else None
    comment = _str(doc, "comment", optional=True)
    if comment and decision is not None and decision.verdict == "deny":
        decision = replace(decision, comment=comment[:MAX_COMMENT])
    if status == "approved" and (decision is None or decision.verdict != "allow"):
        raise WireError("approved without an allow decision")
    if status in ("refused", "expired") and decision is not None and decision.verdict != "deny":
        raise WireError(f"{status} approval with a non-deny decision")
    return ApprovalWait(status=status, decision=decision)
