"""Celery beat's signed checkpoint of the audit chain (ROSTER_AUDIT_CHECKPOINT_SECONDS)."""

from __future__ import annotations

from celery import shared_task

from controlplane.audit.checkpoints import make_checkpoint


@shared_task(ignore_result=True)
def checkpoint() -> int:
    return make_checkpoint(by="schedule")["seq"]
