"""Reads for workers and runs."""

from __future__ import annotations

from django.db import connection
from django.db.models import QuerySet

from controlplane.fleet.models import PolicyVersion, Run, Worker
from controlplane.fleet.tokens import token_hash, token_is_well_formed


def worker_list(*, active_only: bool = False) -> QuerySet[Worker]:
    workers = Worker.objects.all()
    return workers.filter(active=True) if active_only else workers


def worker_get(name: str) -> Worker:
    return Worker.objects.get(name=name)


def run_list(*, worker: Worker | None = None, status: str | None = None, limit: int = 100) -> QuerySet[Run]:
    runs = Run.objects.select_related("worker", "filed_by")
    if worker is not None:
        runs = runs.filter(worker=worker)
    if status:
        runs = runs.filter(status=status)
    return runs.order_by("-id")[:limit]


def run_get(run_id: int) -> Run:
    return Run.objects.select_related("worker").get(pk=run_id)


def run_carried_conversation(run_id: int) -> bool:
    """Whether the run's input carried conversation content (fixed at assembly; False before it)."""
    return bool(Run.objects.filter(pk=run_id).values_list("carries_conversation", flat=True).first())


def run_participants(run_id: int) -> list[dict]:
    """Who was in the room for this run ([{"id", "name", "role"}], fixed at assembly; [] before it or for a
    run that carried no conversation). Every durable write the run makes names these (P4)."""
    return list(Run.objects.filter(pk=run_id).values_list("participants", flat=True).first() or [])


def live_run_for_token(raw: str, *, with_policy_version: bool = False) -> Run | None:
    """The live run (of an active worker) this raw token belongs to, or None. With with_policy_version,
    the run carries `policy_version`, read in the same statement (the decision path's one round trip
    before its transaction). The Run and Worker are read-only snapshots of the decision-relevant columns,
    the box's address among them (the caller checks it: controlplane.fleet.tokens.token_address_problem)."""
    if not token_is_well_formed(raw):
        return None
    live = list(Run.LIVE_STATUSES)
    version = ", (SELECT version FROM fleet_policyversion WHERE id = 1)" if with_policy_version else ""
    sql = (
        "SELECT r.id, r.worker_id, r.origin, r.status, r.taint, r.untrusted, w.name, r.box_address"
        + version +
        " FROM fleet_run r JOIN fleet_worker w ON w.id = r.worker_id"
        " WHERE r.token_hash = %s AND w.active AND r.status IN (" + ", ".join(["%s"] * len(live)) + ")"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [token_hash(raw), *live])
        row = cursor.fetchone()
    if row is None:
        return None
    run = Run(id=row[0], worker_id=row[1], origin=row[2], status=row[3], taint=row[4], untrusted=bool(row[5]),
              box_address=row[7])
    run.worker = Worker(id=row[1], name=row[6], active=True)
    run._state.adding = False
    run.worker._state.adding = False
    if with_policy_version:
        run.policy_version = row[8]
    return run


def policy_version() -> int | None:
    return PolicyVersion.objects.filter(pk=1).values_list("version", flat=True).first()
