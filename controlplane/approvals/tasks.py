"""Celery tasks for approvals: expiring the ones nobody decided in time (Celery beat, every few
seconds), so a held request's approval cannot outlive its time to live."""

from __future__ import annotations

from celery import shared_task

from controlplane.approvals.services import approval_expire_due


@shared_task(ignore_result=True)
def expire_approvals() -> int:
    return approval_expire_due()
