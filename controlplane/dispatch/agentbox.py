"""What a run's box gets from its worker's preset (docs/presets.md), applied without knowing which agent it
is: the image, the command with the run's prompt, the preset's and the worker's environment, the model key's
sentinel under the preset's key variable, and the files written read-only under /config/preset. A plain
command run gets the worker's admin-set image and environment only. Any doubt is a refusal that says what
to do (a missing image names its build; a missing model grant names `preset suggest-grants`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

import docker
from django.conf import settings
from django.db import transaction
from django.db.models import Q

from controlplane.agents.environment import environment_problems
from controlplane.agents.models import RunAgent
from controlplane.agents.rendering import RenderedFile, plan_for
from controlplane.agents.selectors import (
    run_agent_get,
    run_agent_spec,
    worker_agent_choice,
    worker_box_settings,
)
from controlplane.core.errors import RosterError
from controlplane.fleet.models import Run, Worker
from controlplane.fleet.services import run_create
from controlplane.policy.matching import parse_host_pattern
from controlplane.policy.models import Grant


class BoxPlanRefused(RosterError):
    """The run must not start; the message (recorded on the run) says why and what to do."""


@dataclass(frozen=True)
class BoxPlan:
    image: str
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)  # the preset's and the worker's; Roster's go on top
    key_variable: str = ""
    key_sentinel: str = ""
    files: tuple[RenderedFile, ...] = ()
    manifest: dict | None = None  # /config/preset.json, for the box runtime
    preset: str = ""
    model: str = ""
    base_url: str = ""
    build: str = ""  # how to build `image` when it is missing


def agent_run_create(worker: Worker, task: str, *, origin: str, filed_by=None,
                     timeout: int | None = None) -> Run:
    """A run of the worker's agent (its preset, model and base URL, as they are now) on `task`. The run's
    command is the preset's, filled with the task as its prompt, so the run says what it will run; the
    preset is kept with the run as it is now (agents.RunAgent), so a later edit does not change it."""
    choice = worker_agent_choice(worker)
    plan = plan_for(choice.spec, model=choice.model, base_url=choice.base_url, prompt=task,
                    box_image=settings.ROSTER_BOX_IMAGE)
    with transaction.atomic():
        run, _raw = run_create(worker, origin=origin, filed_by=filed_by, command=list(plan.command),
                               timeout_seconds=timeout, task=task)
        RunAgent.objects.create(run=run, preset_slug=choice.preset.slug, preset=choice.spec.as_data(),
                                model=plan.model, base_url=plan.base_url)
    return run


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _names(grant: Grant, scheme: str, host: str, port: int) -> bool:
    """Whether the grant is for this scheme, host and port (a grant without a port: the scheme's)."""
    try:
        pattern, wildcard = parse_host_pattern(grant.host)
    except ValueError:
        return False
    if not (host.endswith("." + pattern) if wildcard else host == pattern):
        return False
    if scheme not in (grant.schemes or ["https"]):
        return False
    return (grant.port or _default_port(scheme)) == port


def model_key_sentinel(worker: Worker, base_url: str) -> str:
    """The sentinel of the secret this worker's grants inject toward the base URL's host: what the preset's
    key variable holds. BoxPlanRefused when no grant injects one there, or grants inject different ones."""
    parts = urlsplit(base_url)
    scheme, host = parts.scheme, (parts.hostname or "").lower()
    port = parts.port or _default_port(scheme)
    grants = (Grant.objects.filter(Q(worker=worker) | Q(worker__isnull=True), enabled=True,
                                   secret__isnull=False, tunnel=False, mode__in=["auto", "ask"])
              .select_related("secret").order_by("slug"))
    secrets = {g.secret.name: g.secret.sentinel for g in grants if _names(g, scheme, host, port)}
    if len(secrets) > 1:
        raise BoxPlanRefused(f"grants of worker {worker.name} inject different secrets toward {host} "
                             f"({', '.join(sorted(secrets))}); its model key variable can hold only one")
    if not secrets:
        raise BoxPlanRefused(
            f"no grant of worker {worker.name} injects a model key toward {host}:{port} (the agent would "
            "have no key): store the key (`manage.py secret set NAME --kind …`) and grant it "
            f"(`manage.py preset suggest-grants {worker.name} --secret NAME`)")
    return next(iter(secrets.values()))


def _checked_worker_env(worker: Worker, env: dict, key_variable: str) -> dict[str, str]:
    problems = environment_problems(env, key_variable=key_variable, field="environment")
    if problems:  # saved around the services: never given to a box
        raise BoxPlanRefused(f"worker {worker.name}'s environment is invalid as stored: "
                             + "; ".join(f"{k}: {v}" for k, v in problems.items()))
    return dict(env)


def box_plan(run: Run, prompt: str) -> BoxPlan:
    """The box this run gets. `prompt`: the text of its /config/prompt.md."""
    worker_image, worker_env = worker_box_settings(run.worker)
    run_agent = run_agent_get(run.pk)
    if run_agent is None:
        env = _checked_worker_env(run.worker, worker_env, "")
        return BoxPlan(image=worker_image or settings.ROSTER_BOX_IMAGE, command=tuple(run.command), env=env,
                       build="" if worker_image else "workers/build.sh")
    spec = run_agent_spec(run_agent)
    env = _checked_worker_env(run.worker, worker_env, spec.key_variable)
    plan = plan_for(spec, model=run_agent.model, base_url=run_agent.base_url, prompt=prompt,
                    box_image=settings.ROSTER_BOX_IMAGE, worker_image=worker_image, worker_env=env)
    return BoxPlan(image=plan.image, command=plan.command, env=plan.env, key_variable=plan.key_variable,
                   key_sentinel=model_key_sentinel(run.worker, plan.base_url), files=plan.files,
                   manifest=plan.manifest(), preset=plan.preset, model=plan.model, base_url=plan.base_url,
                   build=plan.build)


def plan_image_id(client: docker.DockerClient, plan: BoxPlan) -> str:
    """The id of the plan's image, or BoxPlanRefused saying how to build it."""
    try:
        return client.images.get(plan.image).id
    except docker.errors.ImageNotFound:
        whose = f"preset {plan.preset}'s image" if plan.preset else "the box image"
        how = f": build it with {plan.build}" if plan.build else ": pull or build it on this host"
        raise BoxPlanRefused(f"{whose} {plan.image} is missing{how}") from None
