"""Reads for approvals."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from controlplane.approvals.models import Approval


def approval_status(approval_id) -> tuple[str, object] | None:
    """(status, expires_at) in one cheap read; for the long-poll loop."""
    return Approval.objects.filter(pk=approval_id).values_list("status", "expires_at").first()


def open_windows(now: datetime | None = None):
    """Time-boxed approvals whose window is open, soonest to end first (the queue lists them to revoke)."""
    now = now or timezone.now()
    return (Approval.objects.filter(window_until__gt=now, window_revoked_at__isnull=True,
                                    status__in=(Approval.Status.APPROVED, Approval.Status.USED))
            .select_related("run__worker", "decided_by", "grant").order_by("window_until"))
