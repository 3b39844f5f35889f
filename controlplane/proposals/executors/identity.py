"""An approved identity edit: the worker's identity text, replaced. Only a human approves these. The edit
is on the record like an admin's (controlplane.audit.edits): the text before and after, under the worker,
by the person who approved it, via the proposal."""

from __future__ import annotations

from django.db import transaction

from controlplane.audit.edits import AuditedModel
from controlplane.fleet.models import Worker
from controlplane.proposals.executors import Outcome

IDENTITY_EDITS = AuditedModel("worker_identity", name=lambda worker: worker.name,
                              describe=lambda worker: {"identity": worker.identity},
                              worker=lambda worker: worker.name)


def apply(proposal, credential: str | None) -> Outcome:
    if proposal.channel not in ("web", "cli") or proposal.decided_by_id is None:
        # Never reached through a rule (the model and the approval path refuse it); refuse here as well.
        return Outcome(ok=False, transient=False, summary="refused: identity edits need a human's approval")
    with transaction.atomic():
        worker = Worker.objects.select_for_update().get(pk=proposal.worker_id)
        worker.identity = proposal.payload["identity"]
        action = IDENTITY_EDITS.save(worker, by=proposal.decided_by.get_username(),
                                     via=f"proposal {proposal.pk}")
    return Outcome(ok=True, transient=False, summary=f"identity {action}")
