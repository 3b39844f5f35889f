"""A Decision and the only way to make one. Only controlplane.policy.engine imports this module (a
`protected` contract in pyproject.toml, checked by `make lint`), so the engine is the sole producer of
decisions (docs/grants.md, "The Decision object"). Python cannot make forgery impossible for code running in
the same process, so a Decision also has to be *authentic* to count: `is_authentic` checks that it was
minted here and not altered since. Consumers call `require_authentic` (re-exported by the engine)."""

from __future__ import annotations

import enum
import weakref


class Verdict(enum.StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


class DenyReason(enum.StrEnum):
    NO_GRANT = "no_grant"
    TRIPWIRE = "tripwire"  # a secret's sentinel sent where no grant injects that secret
    GRANT_EXPIRED = "grant_expired"
    TAINT_TOO_HIGH = "taint_too_high"
    DENIED_BY_GRANT = "denied_by_grant"
    APPROVAL_REFUSED = "approval_refused"
    APPROVAL_EXPIRED = "approval_expired"
    OVER_BUDGET = "over_budget"
    BAD_TOKEN = "bad_token"
    POLICY_ERROR = "policy_error"



class _Issued:
    """Registry of decisions minted here, with the field values they were minted with."""

    def __init__(self) -> None:
        self._fields: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def add(self, decision: Decision) -> None:
        self._fields[decision] = decision._snapshot()

    def check(self, decision: object) -> bool:
        try:
            return type(decision) is Decision and self._fields.get(decision) == decision._snapshot()
        except Exception:  # noqa: BLE001 - anything odd about the object means "not authentic"
            return False


def _make_minter():
    token = object()
    issued = _Issued()

    def mint(verdict, reason, grant, message, tripwire=False, wire="") -> Decision:
        decision = Decision(token, Verdict(verdict), reason, grant, str(message), bool(tripwire), str(wire))
        issued.add(decision)
        return decision

    return token, mint, issued.check


class Decision:
    """verdict, reason (DenyReason or None), grant (GrantRule or None), message, tripwire, and wire: the
    model wire format of the host the request went to, when a grant says it ("" otherwise), so a refusal
    can be shaped as that provider's error for the agent's SDK to read (docs/wire.md).
    No public constructor, immutable, not copyable or picklable, not subclassable."""

    __slots__ = ("_verdict", "_reason", "_grant", "_message", "_tripwire", "_wire", "__weakref__")

    def __init_subclass__(cls, **kwargs):
        raise TypeError("Decision cannot be subclassed")

    def __init__(self, token, verdict, reason, grant, message, tripwire, wire=""):
        if token is not _TOKEN:
            raise TypeError("a Decision is made only by controlplane.policy.engine")
        set_ = object.__setattr__
        set_(self, "_verdict", verdict)
        set_(self, "_reason", DenyReason(reason) if reason is not None else None)
        set_(self, "_grant", grant)
        set_(self, "_message", message)
        set_(self, "_tripwire", tripwire)
        set_(self, "_wire", wire)

    verdict = property(lambda self: self._verdict)
    reason = property(lambda self: self._reason)
    grant = property(lambda self: self._grant)
    message = property(lambda self: self._message)
    tripwire = property(lambda self: self._tripwire)
    wire = property(lambda self: self._wire)

    def _snapshot(self) -> tuple:
        return (self._verdict, self._reason, self._grant, self._message, self._tripwire, self._wire)

    def __setattr__(self, name, value):
        raise AttributeError("Decision is immutable")

    def __delattr__(self, name):
        raise AttributeError("Decision is immutable")

    def __reduce_ex__(self, protocol):
        raise TypeError("a Decision cannot be copied or pickled")

    def __copy__(self):
        raise TypeError("a Decision cannot be copied")

    def __deepcopy__(self, memo):
        raise TypeError("a Decision cannot be copied")

    def __repr__(self) -> str:
        slug = self._grant.slug if self._grant else None
        return f"Decision({self._verdict}, {self._reason}, grant={slug!r}, tripwire={self._tripwire})"


_TOKEN, mint, is_authentic = _make_minter()


def require_authentic(decision: object) -> Decision:
    """The decision, if this module issued it and nobody altered it; otherwise TypeError."""
    if not is_authentic(decision):
        raise TypeError("not a Decision issued by the policy engine")
    return decision  # type: ignore[return-value]
