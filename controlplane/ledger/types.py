"""Value types the ledger hands out: a reservation, the over-budget answer and a cap's status."""

from __future__ import annotations

from dataclasses import dataclass

from controlplane.core.errors import RosterError


class LedgerError(RosterError):
    """A settle that cannot apply. Subclasses say why, so the API can answer 404 or 409."""


class UnknownDecision(LedgerError):
    pass


class AlreadySettled(LedgerError):
    pass


class DuplicateReservation(LedgerError):
    pass


@dataclass(frozen=True)
class CapStatus:
    scope: str  # "worker:<name>" or "org"
    unit: str
    window: str
    limit: int
    spent: int

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.limit

    def as_dict(self) -> dict:
        return {"scope": self.scope, "unit": self.unit, "window": self.window, "limit": self.limit,
                "spent": self.spent}


@dataclass(frozen=True)
class OverBudget(CapStatus):
    """The first cap a reservation would break. `spent` is what was spent before this request (calls
    still running count at what they reserved); `reserved` is what this request would have reserved;
    `detail` says why a model call's worst case could not be bounded, when that is the reason.
    `in_flight` model calls still running hold `held` of `spent` at their worst case, and give back what
    they do not use when they settle (controlplane.ledger.in_flight)."""

    reserved: int = 0
    detail: str = ""
    in_flight: int = 0
    held: int = 0

    @property
    def waitable(self) -> bool:
        """The remainder is only held, not spent: this call fits once the calls in flight settle (if they
        use nothing), so it may wait for them rather than be refused (controlplane.egress.budget_wait)."""
        return (not self.detail and self.in_flight > 0
                and self.spent - self.held + self.reserved <= self.limit)

    @property
    def message(self) -> str:
        period = self.window if self.window != "all" else "lifetime"
        if self.detail:
            return f"over budget: {self.detail}, so it cannot be held to the {self.scope} {self.unit} cap"
        if self.waitable:
            calls = "call" if self.in_flight == 1 else "calls"
            return (f"held by {self.in_flight} {calls} in flight: {self.scope} has spent "
                    f"{self.spent - self.held} of {self.limit} {self.unit} this {period} and calls still "
                    f"running hold {self.held} more at their worst case; this call would reserve up to "
                    f"{self.reserved}, which fits once they settle")
        text = f"over budget: {self.scope} has spent {self.spent} of {self.limit} {self.unit} this {period}"
        if self.held:
            remains = self.limit - (self.spent - self.held)
            return (text + f" ({self.held} of it held by {self.in_flight} calls in flight); this call's "
                    f"worst case, {self.reserved}, is more than the {max(remains, 0)} that would remain even "
                    "if they used nothing")
        return text + (f"; this call would reserve up to {self.reserved}" if self.reserved else "")

    def as_dict(self) -> dict:
        return {**super().as_dict(), "reserved": self.reserved, "in_flight": self.in_flight,
                "held": self.held}


@dataclass(frozen=True)
class ModelCallFacts:
    """What the gateway read from a model call's request (docs/wire.md, `model_call`)."""

    api: str
    model: str
    stream: bool
    max_output_tokens: int | None
    choices: int
    input_estimate: int


@dataclass(frozen=True)
class TokenUsage:
    """What the gateway read from a model call's response (docs/wire.md, `usage`)."""

    known: bool
    model: str = ""
    input: int = 0
    cached_input: int = 0
    output: int = 0
    reasoning: int = 0
    problem: str = ""
    cache_write: int = 0  # part of `input`, apart from cached_input; includes cache_write_1h
    cache_write_1h: int = 0


@dataclass(frozen=True)
class Reservation:
    decision_id: str
    worker_id: int
    requests: int
    micro: int
    tokens: int = 0
