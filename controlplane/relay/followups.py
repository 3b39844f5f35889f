"""The executor of follow-up task proposals (work the worker proposes: direction and pace, invariant 6),
registered into the proposals executor registry by the relay app (the top layer: proposals must not import
it, and dispatch imports no proposals). An allowed follow-up becomes a proactive run of the worker's agent
(its preset) on the worker's queue: budget-gated (invariant 8), so over a cap it is recorded as refused,
and the proposal says so."""

from __future__ import annotations

from django.conf import settings

from controlplane.dispatch.starting import run_start_agent
from controlplane.fleet.models import Run
from controlplane.proposals.executors import Outcome


def follow_up(proposal, credential: str | None) -> Outcome:
    task = str(proposal.payload.get("task", "")).strip()
    if not task:
        return Outcome(ok=False, transient=False, summary="no task")
    run = run_start_agent(proposal.worker, task, proactive=True,
                          timeout=settings.ROSTER_RUN_DEFAULT_TIMEOUT_SECONDS)
    if run.status == Run.Status.REFUSED:
        return Outcome(ok=False, transient=False, summary=f"run {run.pk} refused", detail=run.status_reason)
    return Outcome(
        ok=True,
        transient=False,
        summary=f"run {run.pk} queued (proactive)",
        detail=f"follow-up of run {proposal.run_id}",
    )
