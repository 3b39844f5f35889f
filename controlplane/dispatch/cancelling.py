"""Cancelling a live run, the request side (command line, admin): its token dies with the status change
and its box, if any, is killed."""

from __future__ import annotations

import contextlib

import docker
import requests

from controlplane.dispatch.engine import box_name, docker_client
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_set_status


def run_cancel(run_id: int, *, by: str = "") -> Run:
    """Cancel a live run: its token dies with the status change; its box, if any, is killed."""
    had_box = Run.objects.filter(pk=run_id, status__in=[Run.Status.STARTING, Run.Status.RUNNING]).exists()
    run = run_set_status(run_id, Run.Status.CANCELLED, f"cancelled by {by}" if by else "cancelled")
    if had_box:
        # A box still being created is removed by its dispatcher, which finds the run ended.
        with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
            docker_client().containers.get(box_name(run_id)).kill()
    return run
