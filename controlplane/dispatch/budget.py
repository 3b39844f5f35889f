"""The budget gate for runs: a proactive run must not start while one of its worker's caps is reached
(the invariant "budgets gate proactive dispatch only; work a human filed always runs"). Asked when a
run is filed and again when its dispatch claims it."""

from __future__ import annotations

from controlplane.fleet.models import Worker
from controlplane.ledger.selectors import exceeded_caps


def budget_refusal(worker: Worker) -> str:
    """Why a proactive run of this worker must not start (a cap is reached), or ""."""
    caps = exceeded_caps(worker)
    if not caps:
        return ""
    parts = [f"{c.scope} {c.unit}/{c.window} {c.spent}/{c.limit}" for c in caps]
    return "over budget: " + ", ".join(parts)
