"""What the decision service answers, as domain values; controlplane.egress.wire turns them into the
gateway's JSON and HTTP statuses."""

from __future__ import annotations

from dataclasses import dataclass, field

from controlplane.egress.limits import approval_hold_seconds
from controlplane.policy.engine import Decision


@dataclass(frozen=True)
class EgressAnswer:
    """The service's answer to one egress request, or to a request whose approval was concluded.
    `inject` and `replace` carry secret values: never logged, never recorded."""

    decision: Decision
    decision_id: str
    approval_id: str | None = None
    budget: dict | None = None
    inject: tuple[dict, ...] = field(default=(), repr=False)
    replace: tuple[dict, ...] = field(default=(), repr=False)
    # Not decided yet: refused only because calls in flight hold the budget's remainder, nothing recorded;
    # the decision API waits for them to settle and decides again (controlplane.egress.budget_wait).
    budget_held: bool = False

    @property
    def hold_seconds(self) -> int:
        """How long the gateway holds a request whose approval is pending."""
        if self.approval_id is None:
            return 0
        return approval_hold_seconds()


@dataclass(frozen=True)
class Concluded:
    """An approval that has left "pending", turned into the final decision. `status` is what the
    gateway's long-poll reports: approved, refused or expired."""

    status: str
    answer: EgressAnswer
    # The approver's comment with a refusal; the gateway returns it to the box in the 403.
    comment: str | None = None
