"""Admission: which queued runs may take a box on this host now. At most ROSTER_BOXES_PER_HOST boxes are
live (starting or running) per box host; queued runs are admitted oldest first (FIFO, by id) as boxes of
this host end. Admission is event-driven: a dispatch message, a box's end (the watcher) and the
reaper's periodic pass each run one admission pass; nothing polls.

The count and the claims happen under one lock per box host, so two admission passes at once can never
together start more boxes than the limit: SQLite begins every transaction IMMEDIATE (the database write
lock), PostgreSQL takes a transaction-scoped advisory lock keyed by the box host's namespace."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction

from controlplane.fleet.models import Run

BOX_STATUSES = (Run.Status.STARTING, Run.Status.RUNNING)


def _lock_admission() -> None:
    if connection.vendor == "postgresql":
        digest = hashlib.sha256(f"roster.admission.{settings.ROSTER_BOX_NAMESPACE}".encode()).digest()
        key = int.from_bytes(digest[:8], "big", signed=True)
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", [key])
    elif connection.vendor == "sqlite":
        if connection.settings_dict.get("OPTIONS", {}).get("transaction_mode") != "IMMEDIATE":
            raise RuntimeError("SQLite must use transaction_mode IMMEDIATE (see settings)")
    else:
        raise RuntimeError(f"admission locking not implemented for {connection.vendor}")


def boxes_live_here() -> int:
    return Run.objects.filter(status__in=BOX_STATUSES, box_host=settings.ROSTER_BOX_NAMESPACE).count()


def free_slots() -> int:
    return max(0, settings.ROSTER_BOXES_PER_HOST - boxes_live_here())


def queued_in_order():
    return Run.objects.filter(status=Run.Status.QUEUED).order_by("pk")


def admit(claim) -> list:
    """One admission pass: under the host's lock, claim (with `claim(run_id)`, which turns a queued run
    into a starting one on this host, or returns None if something else got it) the oldest queued runs,
    as many as there are free slots. Returns what `claim` returned for each run it got."""
    claimed = []
    with transaction.atomic():
        _lock_admission()
        room = free_slots()
        if room <= 0:
            return claimed
        # A few spare candidates: a run cancelled or claimed elsewhere since the read is skipped.
        for run_id in queued_in_order().values_list("pk", flat=True)[: room + 8]:
            got = claim(run_id)
            if got is not None:
                claimed.append(got)
                if len(claimed) == room:
                    break
    return claimed


@dataclass(frozen=True)
class QueueState:
    position: int  # 1 = next to be admitted
    queued: int  # runs waiting in all
    live: int  # boxes live on this host
    limit: int

    @property
    def reason(self) -> str:
        ahead = self.position - 1
        ahead_text = f"{ahead} run{'s' if ahead != 1 else ''} ahead of it" if ahead else "next in line"
        if self.live >= self.limit:
            return (f"waiting for a box slot: all {self.limit} on this host are in use; position "
                    f"{self.position} of {self.queued} ({ahead_text})")
        return (f"waiting to be dispatched: {self.limit - self.live} of {self.limit} box slots free; "
                f"position {self.position} of {self.queued} ({ahead_text})")


def queue_state(run: Run) -> QueueState | None:
    """Where a queued run stands and why it waits; None for a run that is not queued."""
    if run.status != Run.Status.QUEUED:
        return None
    queued = queued_in_order()
    return QueueState(position=queued.filter(pk__lt=run.pk).count() + 1, queued=queued.count(),
                      live=boxes_live_here(), limit=settings.ROSTER_BOXES_PER_HOST)
