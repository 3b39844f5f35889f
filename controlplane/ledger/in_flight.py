"""What calls still in flight hold of a cap: the worst case a model call reserved in tokens and money,
released when its outcome settles. A cap whose remainder only these hold is not spent, and a call refused
against it would fit once they settle (controlplane.egress.budget_wait waits for that instead of
refusing at once: issue 22, "budgets admit exactly N").

Only a model call's reservation is released at its settle; a request, a call's cost_per_call and bytes
are spent once reserved (or known only at settle), so they are never "held"."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from controlplane.core.db import current_connection
from controlplane.ledger.models import Cap, ModelCallReservation, SpendLine, Unit
from controlplane.ledger.totals import window_start

_S = SpendLine._meta.db_table
_M = ModelCallReservation._meta.db_table
# One model call in flight: its reserve tokens line (every model call has one, in the window it was
# reserved in) with no release line yet. Only lines newer than the reservation deadline are read: an
# older reservation without an outcome is settled at its worst case by the reaper, so it holds nothing
# that will come back (and the scan stays bounded whatever the window).
_IN_FLIGHT_SQL = (
    f"SELECT COUNT(*), COALESCE(SUM(s.amount), 0), COALESCE(SUM(m.micro), 0) FROM {_S} s "
    f"JOIN {_M} m ON m.decision_id = s.decision_id "
    "WHERE s.unit = %s AND s.kind = %s AND s.created_at >= %s{worker} "
    f"AND NOT EXISTS (SELECT 1 FROM {_S} r WHERE r.decision_id = s.decision_id AND r.kind = %s)")


@dataclass(frozen=True)
class Held:
    """What `calls` model calls in flight hold of one cap (in the cap's unit)."""

    calls: int
    amount: int


NOTHING_HELD = Held(0, 0)


def held_of(cap: Cap, now: dt.datetime) -> Held:
    """The part of `cap`'s spent total that calls in flight hold and will release when they settle."""
    if cap.unit not in (Unit.TOKENS, Unit.MICRO):
        return NOTHING_HELD
    since = now - dt.timedelta(seconds=settings.ROSTER_RESERVATION_DEADLINE_SECONDS)
    start = window_start(cap.window, now)
    if start is not None and start > since:
        since = start
    params = [Unit.TOKENS, SpendLine.Kind.RESERVE, connection.ops.adapt_datetimefield_value(since)]
    worker = ""
    if cap.worker_id:
        worker = " AND s.worker_id = %s"
        params.append(cap.worker_id)
    params.append(SpendLine.Kind.RELEASE)
    with current_connection().cursor() as cur:
        cur.execute(_IN_FLIGHT_SQL.format(worker=worker), params)
        calls, tokens, micro = cur.fetchone()
    if not calls:
        return NOTHING_HELD
    return Held(int(calls), int(tokens if cap.unit == Unit.TOKENS else micro))
