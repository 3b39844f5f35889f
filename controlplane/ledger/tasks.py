"""Celery tasks for the ledger: settling reservations whose outcome never came (Celery beat)."""

from __future__ import annotations

from celery import shared_task

from controlplane.ledger.overdue import settle_overdue


@shared_task(ignore_result=True)
def settle_overdue_reservations() -> int:
    return settle_overdue()
