"""An approved identity edit: the worker's identity text, replaced. Only a human approves these."""

from __future__ import annotations

from django.db import transaction

from controlplane.audit.services import audit_append
from controlplane.fleet.models import Worker
from controlplane.proposals.executors import Outcome


def apply(proposal, credential: str | None) -> Outcome:
    if proposal.channel not in ("web", "cli") or proposal.decided_by_id is None:
        # Never reached through a rule (the model and the approval path refuse it); refuse here as well.
        return Outcome(ok=False, transient=False, summary="refused: identity edits need a human's approval")
    with transaction.atomic():
        worker = Worker.objects.select_for_update().get(pk=proposal.worker_id)
        worker.identity = proposal.payload["identity"]
        worker.save(update_fields=["identity"])
        audit_append(
            "grant_change",
            {
                "object": "worker_identity",
                "worker": worker.name,
                "proposal": str(proposal.pk),
                "by": proposal.decided_by.get_username(),
            },
            worker=worker.name,
        )
    return Outcome(ok=True, transient=False, summary="identity updated")
