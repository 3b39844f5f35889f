"""Value types the ledger hands out: a reservation, the over-budget answer and a cap's status."""

from __future__ import annotations

from dataclasses import dataclass


class LedgerError(Exception):
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
    """The first cap a reservation would break. `spent` is what was spent before this request."""

    @property
    def message(self) -> str:
        return (f"over budget: {self.scope} has spent {self.spent} of {self.limit} {self.unit} "
                f"this {self.window if self.window != 'all' else 'lifetime'}")


@dataclass(frozen=True)
class Reservation:
    decision_id: str
    worker_id: int
    requests: int
    micro: int
