"""Tells every open approval-queue page that an approval changed. Called after the change commits."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

log = logging.getLogger(__name__)
APPROVALS_GROUP = "approvals"


def approval_changed(approval_id: str, status: str) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(
            APPROVALS_GROUP, {"type": "approval.changed", "approval_id": str(approval_id), "status": status}
        )
    except Exception:  # noqa: BLE001 - a page refresh shows the truth; a broken push must not undo a decision
        log.warning("could not broadcast approval %s change", approval_id, exc_info=True)
