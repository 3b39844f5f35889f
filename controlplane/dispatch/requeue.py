"""Requeueing a run's task, a repair (P4: "tasks requeued"; docs/memory.md, "Repair"): a new run of the same
worker with the same task and the same input origin (a conversation run's input is drawn again from the
original's messages), as it would be started now: the worker's agent as configured today for an agent run,
the same command for a command run. Only an ended run is requeued; an admin asks, and the repair is audited
as `repair` naming the run it repairs (`repairs`), in the transaction that creates the new run."""

from __future__ import annotations

from django.db import transaction

from controlplane.agents.models import RunAgent
from controlplane.audit.services import audit_append
from controlplane.core.errors import RosterError
from controlplane.core.roles import is_admin
from controlplane.dispatch.starting import run_start, run_start_agent
from controlplane.fleet.models import Run


class RequeueRefused(RosterError):
    """The run cannot be requeued (still live, or the one asking is not an admin); nothing was changed."""


def run_requeue(run_id: int, *, by) -> Run:
    """The new run (queued, or refused by budget for a proactive run, as any proactive start would be)."""
    if not is_admin(by):
        raise RequeueRefused(f"{by.get_username()} is not an admin: only admins repair runs")
    with transaction.atomic():
        original = Run.objects.select_for_update().select_related("worker").get(pk=run_id)
        if original.is_live:
            raise RequeueRefused(f"run {run_id} is still {original.status}: requeue it once it has ended "
                                 "(or cancel it first)")
        proactive = original.origin == Run.Origin.PROACTIVE
        if RunAgent.objects.filter(run=original).exists():
            new = run_start_agent(original.worker, original.task, proactive=proactive,
                                  timeout=original.timeout_seconds, filed_by=by)
        else:
            new = run_start(original.worker, original.command, proactive=proactive,
                            timeout=original.timeout_seconds, filed_by=by, task=original.task)
        # Set before the commit that lets its dispatch start, so its input is assembled from the original's.
        Run.objects.filter(pk=new.pk).update(requeue_of=original)
        new.requeue_of = original
        # Under the new run (its timeline opens with what it repairs); `repairs` names the original.
        audit_append("repair", {"action": "requeue", "repairs": original.pk, "run": new.pk,
                                "worker": original.worker.name, "by": by.get_username()},
                     run=new, worker=original.worker)
    return new
