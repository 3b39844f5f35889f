"""Reads for approvals."""

from __future__ import annotations

from controlplane.approvals.models import Approval


def approval_status(approval_id) -> tuple[str, object] | None:
    """(status, expires_at) in one cheap read; for the long-poll loop."""
    return Approval.objects.filter(pk=approval_id).values_list("status", "expires_at").first()
