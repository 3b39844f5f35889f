"""Workers and runs: creation, the run token, status changes and taint. Every state change that matters
to the security story is audited in the same transaction."""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from controlplane.audit.services import audit_append
from controlplane.core.errors import RosterError, ValidationFailed
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Run, Worker
from controlplane.fleet.tokens import token_hash, token_is_well_formed, token_new

TERMINAL_STATUSES = frozenset(s for s in Run.Status.values if s not in Run.LIVE_STATUSES)
# Fields a status change may set alongside the status. token_hash, taint and untrusted are not here:
# they change only through their own rules (revocation, never-lowering taint).
RUN_STATUS_FIELDS = frozenset(
    {"started_at", "ended_at", "deadline", "exit_code", "output", "output_sources", "output_truncated",
     "image_id", "container_id", "answer"}
)


class RunStateError(RosterError):
    """A status change the run's lifecycle does not allow (e.g. leaving a terminal state)."""


def worker_create(name: str, description: str = "", identity: str = "") -> Worker:
    worker = Worker(name=name, description=description, identity=identity)
    try:
        worker.full_clean()
    except DjangoValidationError as exc:
        raise ValidationFailed({k: " ".join(v) for k, v in exc.message_dict.items()}) from exc
    worker.save()
    return worker


def run_create(
    worker: Worker, *, origin: str = Run.Origin.HUMAN, filed_by=None, command: Sequence[str] = (),
    timeout_seconds: int | None = None, task: str = "",
) -> tuple[Run, str]:
    """Create a queued run and return it with its raw token (the only time the raw value exists)."""
    if not worker.active:
        raise RunStateError(f"worker {worker.name} is not active")
    if origin not in Run.Origin.values:
        raise ValidationFailed({"origin": f"must be one of {', '.join(Run.Origin.values)}"})
    raw, hashed = token_new()
    timeout = settings.ROSTER_RUN_DEFAULT_TIMEOUT_SECONDS if timeout_seconds is None else int(timeout_seconds)
    if timeout <= 0:
        raise ValidationFailed({"timeout_seconds": "must be a positive number of seconds"})
    with transaction.atomic():
        run = Run.objects.create(
            worker=worker, origin=origin, filed_by=filed_by, command=list(command), token_hash=hashed,
            timeout_seconds=timeout, task=str(task),
        )
        audit_append(
            "run_state",
            {"run": run.pk, "worker": worker.name, "from": None, "to": run.status, "origin": origin,
             "filed_by": filed_by.get_username() if filed_by else None},
            run=run, worker=worker,
        )
    return run, raw


def run_resolve_token(raw: str) -> Run | None:
    """The live run this token belongs to, or None (unknown, ended, or the worker was deactivated)."""
    if not token_is_well_formed(raw):
        return None
    return (
        Run.objects.select_related("worker")
        .filter(token_hash=token_hash(raw), status__in=Run.LIVE_STATUSES, worker__active=True)
        .first()
    )


def run_set_status(run_id: int, status: str, reason: str = "", **fields) -> Run:
    if status not in Run.Status.values:
        raise ValidationFailed({"status": f"unknown run status {status!r}"})
    unknown = set(fields) - RUN_STATUS_FIELDS
    if unknown:
        raise ValidationFailed({name: "cannot be set through a status change" for name in sorted(unknown)})
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("worker").get(pk=run_id)
        previous = run.status
        if previous in TERMINAL_STATUSES:
            raise RunStateError(f"run {run_id} already ended ({previous}); it cannot become {status}")
        now = timezone.now()
        run.status = status
        run.status_reason = reason
        for name, value in fields.items():
            setattr(run, name, value)
        if status == Run.Status.RUNNING and run.started_at is None:
            run.started_at = now
        if status in TERMINAL_STATUSES:
            run.token_hash = None  # revocation: the box's credential stops working with this commit
            if run.ended_at is None:
                run.ended_at = now
        run.save()
        audit_append(
            "run_state",
            {"run": run.pk, "worker": run.worker.name, "from": previous, "to": status, "reason": reason,
             "exit_code": run.exit_code},
            run=run, worker=run.worker,
        )
    return run


def run_raise_taint(run_id: int, result_class: int, untrusted: bool) -> Run:
    """Raise taint to at least result_class and set untrusted if asked; one UPDATE, so it never lowers
    either, even against a concurrent raise."""
    level = DataClass(int(result_class))
    changes = {"taint": Greatest(F("taint"), Value(int(level)))}
    if untrusted:
        changes["untrusted"] = Value(True)
    updated = Run.objects.filter(pk=run_id).update(**changes)
    if not updated:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return Run.objects.select_related("worker").get(pk=run_id)


def run_fix_input(run_id: int, *, carries_conversation: bool, participants: list[dict],
                  input_sha256: str, notes: list[int] | None = None, knowledge: dict | None = None) -> Run:
    """Record what the run's input carried, once, when dispatch assembles it (before the box starts):
    whether it holds conversation content and who was in the room. Audited as `run_input`; a second call
    for the same run is refused, so no later step can launder a run into a clean one."""
    clean = [{"id": str(p.get("id", ""))[:255], "name": str(p.get("name", ""))[:255],
              "role": str(p.get("role", ""))[:32]} for p in participants]
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("worker").get(pk=run_id)
        if run.input_assembled:
            raise RunStateError(f"run {run_id}'s input was already assembled")
        run.input_assembled = True
        run.carries_conversation = bool(carries_conversation)
        run.participants = clean
        run.input_sha256 = input_sha256
        run.save(update_fields=["input_assembled", "carries_conversation", "participants", "input_sha256"])
        audit_append(
            "run_input",
            {"run": run.pk, "worker": run.worker.name, "carries_conversation": run.carries_conversation,
             "participants": clean, "input_sha256": input_sha256,
             # the ids of the notes recalled into it (their text is memory's, and can be forgotten)
             "notes": [int(n) for n in notes or []],
             # the knowledge checkout it was given: the commit, and whether it could write (docs/knowledge.md)
             "knowledge": ({"commit": str(knowledge.get("commit", "")),
                            "writable": bool(knowledge.get("writable"))} if knowledge else None)},
            run=run, worker=run.worker,
        )
    return run
