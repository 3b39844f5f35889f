"""Starting a run, the request side (command line, admin, scheduler): record it and queue its dispatch.
What happens next is the worker side's (controlplane.dispatch.running); a run that is never picked up is
offered again by the reaper (controlplane.dispatch.reaper)."""

from __future__ import annotations

from django.db import transaction

from controlplane.dispatch.agentbox import agent_run_create
from controlplane.dispatch.budget import budget_refusal
from controlplane.dispatch.tasks import dispatch_run
from controlplane.fleet.models import Run, Worker
from controlplane.fleet.services import run_create, run_set_status


def run_start(worker: Worker, command, *, proactive: bool = False, timeout: int | None = None,
              filed_by=None, task: str = "") -> Run:
    """Record a run and queue its dispatch. Budgets gate proactive runs only: a proactive run over a cap
    is recorded as refused; a run a human filed always goes ahead."""
    origin = Run.Origin.PROACTIVE if proactive else Run.Origin.HUMAN
    # The token minted here is dropped: the box gets a fresh one when its dispatch claims the run, so no
    # usable credential ever passes through the broker.
    run, _ = run_create(worker, origin=origin, filed_by=filed_by, command=list(command),
                        timeout_seconds=timeout, task=task)
    return _queue(run, worker, proactive)


def run_start_agent(worker: Worker, task: str, *, proactive: bool = False, timeout: int | None = None,
                    filed_by=None) -> Run:
    """Record a run of the worker's agent (its preset and model, docs/presets.md) on `task` and queue its
    dispatch, as run_start does for a command."""
    origin = Run.Origin.PROACTIVE if proactive else Run.Origin.HUMAN
    run = agent_run_create(worker, task, origin=origin, filed_by=filed_by, timeout=timeout)
    return _queue(run, worker, proactive)


def _queue(run: Run, worker: Worker, proactive: bool) -> Run:
    if proactive:
        refusal = budget_refusal(worker)
        if refusal:
            return run_set_status(run.pk, Run.Status.REFUSED, refusal)
    # robust: if the broker is down the run stays queued and the reaper offers it again later.
    transaction.on_commit(lambda: dispatch_run.delay(run.pk), robust=True)
    return run
