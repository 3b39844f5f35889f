"""The Docker engine client, created once per process (the SDK keeps a connection pool)."""

from __future__ import annotations

import functools

import docker
from django.conf import settings


@functools.cache
def docker_client() -> docker.DockerClient:
    return docker.from_env(timeout=settings.ROSTER_DOCKER_TIMEOUT_SECONDS)


def box_name(run_id: int) -> str:
    """One name per run: Docker refuses a second container with the same name, so even a bug that got
    past the claim could not start two boxes for one run."""
    return f"{settings.ROSTER_BOX_NAMESPACE}-run-{run_id}"


# A box created for the box watcher (controlplane.dispatch.watcher) to start and follow; a box without it is
# followed by the process that started it (running.run_dispatch, inline) and the watcher leaves it alone.
WATCHED_LABEL = "roster.watched"


def box_labels(run_id: int, *, watched: bool = False) -> dict[str, str]:
    labels = {"roster.namespace": settings.ROSTER_BOX_NAMESPACE, "roster.run": str(run_id)}
    if watched:
        labels[WATCHED_LABEL] = "1"
    return labels
