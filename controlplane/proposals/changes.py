"""What every change of a proposal does besides itself: its audit record, written in the change's own
transaction, and, after the commit, a note to the live queue pages (only "something changed")."""

from __future__ import annotations

from django.db import transaction

from controlplane.approvals import broadcast
from controlplane.audit.services import audit_append
from controlplane.proposals.models import Proposal


def audit_proposal(proposal: Proposal, data: dict, verdict: str = "") -> None:
    audit_append(
        "proposal",
        {"proposal": str(proposal.pk), **data},
        run=proposal.run_id,
        worker=proposal.worker.name,
        verdict=verdict,
    )


def announce_after_commit(proposal: Proposal) -> None:
    """Call inside the transaction: after commit, tell the queue pages the proposal changed."""
    proposal_id, status = str(proposal.pk), proposal.status
    transaction.on_commit(lambda: broadcast.approval_changed(proposal_id, status))
