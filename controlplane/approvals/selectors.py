"""Reads for approvals."""

from __future__ import annotations

from django.db.models import QuerySet

from controlplane.approvals.models import Approval


def approval_list(*, status: str | None = None, limit: int = 100) -> QuerySet[Approval]:
    approvals = Approval.objects.select_related("run__worker", "decided_by")
    if status:
        approvals = approvals.filter(status=status)
    return approvals.order_by("-created_at")[:limit]


def approval_pending() -> QuerySet[Approval]:
    return Approval.objects.select_related("run__worker").filter(status=Approval.Status.PENDING)


def approval_get(approval_id) -> Approval:
    return Approval.objects.select_related("run__worker", "grant", "decided_by").get(pk=approval_id)


def approval_status(approval_id) -> tuple[str, object] | None:
    """(status, expires_at) in one cheap read; for the long-poll loop."""
    return Approval.objects.filter(pk=approval_id).values_list("status", "expires_at").first()
