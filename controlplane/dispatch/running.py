"""Running a run, the worker side: claim it, check the ground, create its box; start it (attached first, so
no output is missed), mark it running, finish the run when the box ends, clean up. A queued dispatch
(runs_admit, a Celery task) only admits and creates; the box watcher (controlplane.dispatch.watcher) does
the rest, so no Celery process is held for a box's life. run_dispatch does it all inline, for tools and
tests. Every state change goes through controlplane.fleet.services.run_set_status (audited), except the
claim, which must be a conditional UPDATE so two deliveries of one dispatch can never both start a box; it
writes its own audit record in the same transaction."""

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
from controlplane.dispatch import admission, agentbox, box, preflight
from controlplane.dispatch.answers import run_answer
from controlplane.dispatch.budget import budget_refusal
from controlplane.dispatch.engine import box_labels, docker_client
from controlplane.dispatch.rundirs import run_dirs_create, run_dirs_path, run_dirs_remove
from controlplane.dispatch.runinput import conversation_of, run_input_assemble
from controlplane.dispatch.sentinels import sentinel_environment
from controlplane.fleet.models import Run
from controlplane.fleet.output import output_pieces, stdout_text
from controlplane.fleet.services import RunStateError, run_set_status
from controlplane.fleet.tokens import token_new
from controlplane.knowledge.checkout import checkout_collect

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


def box_address_record(run_id: int, container) -> None:
    """Record the started box's address on the locked network (the one network it was created on): the
    run's token is accepted only from there (docs/wire.md, "A token is bound to its box"). Docker assigns
    it at start, so until this write lands (milliseconds) the box's own requests are refused too
    (bad_token, audited), never let through."""
    container.reload()
    network_name = container.attrs.get("HostConfig", {}).get("NetworkMode", "")
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


def run_prepare(run: Run, token: str, *, watched: bool = False):
    """Check the ground and create the claimed run's box, not started: (client, container), or None when
    the run was refused or failed here (recorded, and nothing left behind). Whoever starts the box
    attaches to it first (box_launch), so none of its output can be missed."""
    client = None
    try:
        ground = ground_check(run)
        if isinstance(ground, str):
            run_end(run.pk, Run.Status.REFUSED, ground)
            return None
        client, network, image_id = ground
        run_input = run_input_assemble(run, conversation_of(run))
        try:
            plan = agentbox.box_plan(run, run_input.prompt)
            if plan.image != settings.ROSTER_BOX_IMAGE:
                image_id = agentbox.plan_image_id(client, plan)
        except RosterError as exc:  # a preset's image missing, no model key granted: say what to do
            run_end(run.pk, Run.Status.REFUSED, str(exc))
            _cleanup(client, run.pk)
            return None
        dirs = run_dirs_create(run, run_input, plan)
        kwargs = box.box_create_kwargs(run, image_id=image_id, network=network, token=token, dirs=dirs,
                                       sentinels=sentinel_environment(run.worker), plan=plan)
        if watched:
            kwargs["labels"] = box_labels(run.pk, watched=True)
        Run.objects.filter(pk=run.pk).update(image_id=image_id)
        return client, client.containers.create(**kwargs)
    except Exception as exc:
        log.exception("run %s: dispatch failed", run.pk)
        run_end(run.pk, Run.Status.FAILED, f"dispatch failed: {exc.__class__.__name__}: {str(exc)[:300]}")
        _cleanup(client, run.pk)
        return None


def box_launch(run_id: int, container, *, claimed_at: float | None = None):
    """Attach to the created box, start it, mark its run running: (collector, deadline), or None if the
    run ended meanwhile (a cancel, the reaper), and then the box is gone too."""
    collector = box.box_output_collector(container)  # before start: no output can be missed
    container.start()
    box_address_record(run_id, container)  # first: its token works from there only
    started = timezone.now()
    if claimed_at is not None:
        log.info("run %s: box up %.0f ms after claim", run_id, 1000 * (time.monotonic() - claimed_at))
    run = Run.objects.get(pk=run_id)
    deadline = started + timedelta(seconds=run.timeout_seconds)
    if run_mark_running(run_id, started_at=started, deadline=deadline, image_id=run.image_id,
                        container_id=container.id) is None:
        log.info("run %s ended while its box was starting; removing the box", run_id)
        collector.stop()
        box.box_kill(container)
        return None
    return collector, deadline


def box_done(client, run_id: int, outcome: box.BoxOutcome) -> None:
    """The box exited (or was killed): end the run with what it printed, then remove the box and its dirs.
    In that order so a watcher killed in between loses nothing: the run's outcome is recorded, and the box
    of an ended run is the reaper's to remove (the other order left a running run without its box, which
    a restarted watcher could only fail as gone)."""
    run_finish(run_id, outcome)
    with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
        box.box_remove(client, run_id)
    knowledge_collect(run_id)
    run_dirs_remove(run_id)


def knowledge_collect(run_id: int) -> None:
    """The box is gone: what it left in a writable knowledge checkout becomes a knowledge_change proposal
    (controlplane.knowledge.checkout). A failure here is logged and never undoes the run's outcome."""
    try:
        outcome = checkout_collect(run_id, run_dirs_path(run_id) / "knowledge")
        if outcome:
            log.info("run %s: knowledge %s", run_id, outcome)
    except Exception:
        log.exception("run %s: collecting its knowledge checkout failed", run_id)


def _cleanup(client, run_id: int) -> None:
    if client is not None:
        with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
            box.box_remove(client, run_id)
    run_dirs_remove(run_id)


def runs_admit() -> list[int]:
    """One admission pass (controlplane.dispatch.admission) and the boxes of the runs it admitted created,
    not started: the box watcher starts and watches them, so no Celery process holds a box."""
    prepared = []
    for run, token in admission.admit(run_claim):
        if run_prepare(run, token, watched=True) is not None:
            prepared.append(run.pk)
    return prepared


def run_dispatch(run_id: int) -> None:
    """Inline, in this process: claim the run, check the ground, start its box, watch it to the end, clean
    up. Safe to call twice. For tests and tools; queued dispatch goes through runs_admit and the watcher."""
    claimed = run_claim(run_id)
    if claimed is None:
        log.info("run %s: not queued any more; this delivery does nothing", run_id)
        return
    run, token = claimed
    prepared = run_prepare(run, token)
    if prepared is None:
        return
    client, container = prepared
    try:
        launched = box_launch(run_id, container, claimed_at=time.monotonic())
        if launched is None:
            return
        collector, deadline = launched
        box_done(client, run_id, box.box_watch(container, deadline, collector=collector))
    except Exception as exc:
        log.exception("run %s: dispatch failed", run_id)
        run_end(run_id, Run.Status.FAILED, f"dispatch failed: {exc.__class__.__name__}: {str(exc)[:300]}")
    finally:
        _cleanup(client, run_id)
