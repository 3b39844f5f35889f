"""Reservations whose outcome never came (issue 22.3): the gateway reports every allowed request's outcome
and keeps it until the control plane acknowledges it, but a gateway lost for good, or a decision the
gateway never received (the decision API died before answering), leaves a reservation open. Past
ROSTER_RESERVATION_DEADLINE_SECONDS it is settled at its worst case (a model call's reserved tokens and
money; bytes, unknown, as 0), flagged "overdue" in its spend record; its run decision is marked with
outcome status 0. An outcome arriving later is answered "already_settled" and changes nothing.

Celery beat runs it (controlplane.ledger.tasks). It only looks back a week past the deadline: an older
open reservation would mean beat itself was down for that long, and the scan stays bounded."""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from controlplane.fleet.models import RunDecision
from controlplane.ledger.models import SpendLine, Unit
from controlplane.ledger.services import settle
from controlplane.ledger.types import AlreadySettled, TokenUsage, UnknownDecision

log = logging.getLogger(__name__)
LOOK_BACK = dt.timedelta(days=7)
_S = SpendLine._meta.db_table
_OPEN_SQL = (f"SELECT s.decision_id FROM {_S} s WHERE s.unit = %s AND s.kind = %s AND s.created_at < %s "
             "AND s.created_at >= %s "
             f"AND NOT EXISTS (SELECT 1 FROM {_S} t WHERE t.decision_id = s.decision_id AND t.kind = %s) "
             "ORDER BY s.created_at LIMIT %s")
NO_OUTCOME = "no outcome reported before the reservation deadline"


def overdue_reservations(now: dt.datetime, limit: int = 500) -> list[str]:
    cutoff = now - dt.timedelta(seconds=settings.ROSTER_RESERVATION_DEADLINE_SECONDS)
    adapt = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cur:
        cur.execute(_OPEN_SQL, [Unit.REQUESTS, SpendLine.Kind.RESERVE, adapt(cutoff),
                                adapt(cutoff - LOOK_BACK), SpendLine.Kind.SETTLE, limit])
        return [row[0] for row in cur.fetchall()]


def settle_overdue(now: dt.datetime | None = None, limit: int = 500) -> int:
    """Settle up to `limit` reservations past the deadline, each in its own transaction; returns how many."""
    now = now or timezone.now()
    settled = 0
    for decision_id in overdue_reservations(now, limit):
        try:
            with transaction.atomic():
                settle(decision_id, 0, 0, TokenUsage(known=False, problem=NO_OUTCOME), overdue=True)
                RunDecision.objects.filter(decision_id=decision_id, outcome_at__isnull=True).update(
                    outcome_at=now, outcome_status=0)
        except (UnknownDecision, AlreadySettled):
            continue  # its outcome arrived meanwhile
        settled += 1
    if settled:
        log.warning("settled %d reservation(s) with no outcome at their worst case (flagged overdue)",
                    settled)
    return settled
