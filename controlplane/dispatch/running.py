"""Running a run, the worker side (a Celery worker's dispatch task): claim it, check the ground, start
its box, mark it running, watch the box to the end, finish the run, clean up. Every state change goes
through controlplane.fleet.services.run_set_status (audited), except the claim, which must be a
conditional UPDATE so two deliveries of one dispatch can never both start a box; it writes its own
audit record in the same transaction."""

from __future__ import annotations

import contextlib
import logging
import time
from datetime import datetime, timedelta

import docker
import requests
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.audit.services import audit_append
from controlplane.core.errors import RosterError
from controlplane.dispatch import agentbox, box, preflight
from controlplane.dispatch.answers import run_answer
from controlplane.dispatch.budget import budget_refusal
from controlplane.dispatch.engine import docker_client
from controlplane.dispatch.rundirs import run_dirs_create, run_dirs_remove
from controlplane.dispatch.runinput import conversation_of, run_input_assemble
from controlplane.dispatch.sentinels import sentinel_environment
from controlplane.fleet.models import Run
from controlplane.fleet.output import output_pieces, stdout_text
from controlplane.fleet.services import RunStateError, run_set_status
from controlplane.fleet.tokens import token_new

log = logging.getLogger(__name__)


def run_claim(run_id: int) -> tuple[Run, str] | None:
    """queued -> starting, once. Returns the run and the box's fresh token, or None if another delivery
    (or a cancel) got there first."""
    raw, hashed = token_new()
    grace = timezone.now() + timedelta(seconds=settings.ROSTER_RUN_START_GRACE_SECONDS)
    with transaction.atomic():
        claimed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
            status=Run.Status.STARTING, status_reason="", token_hash=hashed, deadline=grace,
            box_host=settings.ROSTER_BOX_NAMESPACE,
        )
        if not claimed:
            return None
        run = Run.objects.select_related("worker").get(pk=run_id)
        audit_append(
            "run_state",
            {"run": run.pk, "worker": run.worker.name, "from": Run.Status.QUEUED, "to": Run.Status.STARTING,
             "reason": "claimed by dispatcher", "exit_code": None},
            run=run, worker=run.worker,
        )
    return run, raw


def run_mark_running(run_id: int, *, started_at: datetime, deadline: datetime, image_id: str,
                     container_id: str) -> Run | None:
    """starting -> running, once its box is up; None if the run ended meanwhile (a cancel or the
    reaper), and then its box must go."""
    return _run_set_unless_ended(run_id, Run.Status.RUNNING, "", started_at=started_at, deadline=deadline,
                                 image_id=image_id, container_id=container_id)


def run_end(run_id: int, status: str, reason: str = "", **fields) -> Run | None:
    """End a run unless it already ended (a cancel or the reaper won the race). Ending revokes its token."""
    return _run_set_unless_ended(run_id, status, reason, **fields)


def _run_set_unless_ended(run_id: int, status: str, reason: str, **fields) -> Run | None:
    try:
        return run_set_status(run_id, status, reason, **fields)
    except RunStateError:
        return None


def outcome_fields(outcome: box.BoxOutcome) -> tuple[str, str, dict]:
    fields = {"exit_code": outcome.exit_code, "output": outcome.output,
              "output_sources": [list(item) for item in outcome.sources],
              "output_truncated": outcome.truncated, "ended_at": timezone.now()}
    if outcome.timed_out:
        return Run.Status.TIMED_OUT, "killed at the run's deadline", fields
    if outcome.oom_killed:
        return Run.Status.FAILED, "killed: out of memory", fields
    if outcome.exit_code == 0:
        return Run.Status.SUCCEEDED, "", fields
    return Run.Status.FAILED, f"exit code {outcome.exit_code}", fields


def box_address_record(run_id: int, container, network_name: str) -> None:
    """Record the started box's address on the locked network: the run's token is accepted only from
    there (docs/wire.md, "A token is bound to its box"). Docker assigns it at start, so until this write
    lands (milliseconds) the box's own requests are refused too (bad_token, audited), never let through."""
    container.reload()
    networks = container.attrs.get("NetworkSettings", {}).get("Networks", {}) or {}
    address = (networks.get(network_name) or {}).get("IPAddress") or None
    if address is None:
        raise RuntimeError(f"the box has no address on {network_name}")
    Run.objects.filter(pk=run_id).update(box_address=address)


def run_finish(run_id: int, outcome: box.BoxOutcome) -> Run | None:
    status, reason, fields = outcome_fields(outcome)
    # From stdout only: a line the box wrote to stderr can never split or pose as the answer.
    stdout = stdout_text(output_pieces(outcome.output, fields["output_sources"]))
    fields["answer"] = run_answer(Run.objects.get(pk=run_id), stdout)
    ended = run_end(run_id, status, reason, **fields)
    if ended is None:
        # Cancelled meanwhile: keep what the box printed; the status and its audit record stand.
        Run.objects.filter(pk=run_id).update(output=outcome.output, output_sources=fields["output_sources"],
                                             output_truncated=outcome.truncated, exit_code=outcome.exit_code)
    return ended


def ground_check(run: Run):
    """(docker client, locked network, image id), or the reason this run must not start."""
    if run.origin == Run.Origin.PROACTIVE:
        refusal = budget_refusal(run.worker)
        if refusal:
            return refusal
    try:
        client = docker_client()
        network, image_id = preflight.preflight(client)
    except preflight.PreflightRefused as exc:
        return str(exc)
    except (docker.errors.DockerException, requests.RequestException) as exc:
        return f"docker engine unavailable: {exc.__class__.__name__}"
    return client, network, image_id


def run_dispatch(run_id: int) -> None:
    """Claim the run, check the ground, start its box, watch it to the end, clean up. Safe to call twice."""
    claimed = run_claim(run_id)
    if claimed is None:
        log.info("run %s: not queued any more; this delivery does nothing", run_id)
        return
    run, token = claimed
    claimed_at = time.monotonic()
    client = None
    try:
        ground = ground_check(run)
        if isinstance(ground, str):
            run_end(run_id, Run.Status.REFUSED, ground)
            return
        client, network, image_id = ground
        run_input = run_input_assemble(run, conversation_of(run))
        try:
            plan = agentbox.box_plan(run, run_input.prompt)
            if plan.image != settings.ROSTER_BOX_IMAGE:
                image_id = agentbox.plan_image_id(client, plan)
        except RosterError as exc:  # a preset's image missing, no model key granted: say what to do
            run_end(run_id, Run.Status.REFUSED, str(exc))
            return
        dirs = run_dirs_create(run, run_input, plan)
        kwargs = box.box_create_kwargs(run, image_id=image_id, network=network, token=token, dirs=dirs,
                                       sentinels=sentinel_environment(run.worker), plan=plan)
        container = client.containers.create(**kwargs)
        collector = box.box_output_collector(container)  # before start: no output can be missed
        container.start()
        box_address_record(run_id, container, network.name)  # first: its token works from there only
        started = timezone.now()
        log.info("run %s: box up %.0f ms after claim", run_id, 1000 * (time.monotonic() - claimed_at))
        deadline = started + timedelta(seconds=run.timeout_seconds)
        if run_mark_running(run_id, started_at=started, deadline=deadline, image_id=image_id,
                            container_id=container.id) is None:
            log.info("run %s ended while its box was starting; removing the box", run_id)
            collector.stop()
            return
        outcome = box.box_watch(container, deadline, collector=collector)
        box.box_remove(client, run_id)  # gone before the run reads as ended
        run_finish(run_id, outcome)
    except Exception as exc:
        log.exception("run %s: dispatch failed", run_id)
        run_end(run_id, Run.Status.FAILED, f"dispatch failed: {exc.__class__.__name__}: {str(exc)[:300]}")
    finally:
        if client is not None:
            with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
                box.box_remove(client, run_id)
        run_dirs_remove(run_id)
