"""Reads: which preset and settings a worker's runs get, and what a run was started with."""

from __future__ import annotations

from dataclasses import dataclass, field

from controlplane.agents.models import Preset, RunAgent, WorkerAgent
from controlplane.agents.services import preset_spec
from controlplane.agents.spec import PresetSpec, validate_preset
from controlplane.core.errors import RosterError
from controlplane.fleet.models import Worker

REFERENCE = "reference"


@dataclass(frozen=True)
class AgentChoice:
    """A worker's agent as its next run gets it."""

    preset: Preset
    spec: PresetSpec
    model: str = ""  # "" = the preset's default
    base_url: str = ""
    image: str = ""  # the worker's own box image, "" = the preset's
    environment: dict[str, str] = field(default_factory=dict)


def preset_get(slug: str) -> Preset:
    try:
        return Preset.objects.get(slug=slug)
    except Preset.DoesNotExist:
        if slug == REFERENCE:
            raise RosterError("the reference preset is not loaded: run `manage.py preset load` (migrate "
                              "loads the built-in presets too)") from None
        raise RosterError(f"no preset named {slug!r} (`manage.py preset list`)") from None


def preset_list() -> list[Preset]:
    return list(Preset.objects.order_by("kind", "slug"))


def worker_agent_get(worker: Worker) -> WorkerAgent | None:
    return WorkerAgent.objects.select_related("preset").filter(worker=worker).first()


def worker_agent_choice(worker: Worker) -> AgentChoice:
    """The worker's preset and settings; the reference preset for a worker that chose none."""
    agent = worker_agent_get(worker)
    if agent is None:
        preset = preset_get(REFERENCE)
        return AgentChoice(preset=preset, spec=preset_spec(preset))
    return AgentChoice(preset=agent.preset, spec=preset_spec(agent.preset), model=agent.model,
                       base_url=agent.base_url, image=agent.image, environment=dict(agent.environment))


def worker_box_settings(worker: Worker) -> tuple[str, dict[str, str]]:
    """The admin's image ("" = the default) and environment for any box of this worker."""
    agent = WorkerAgent.objects.filter(worker=worker).only("image", "environment").first()
    if agent is None:
        return "", {}
    return agent.image, dict(agent.environment)


def run_agent_get(run_id: int) -> RunAgent | None:
    return RunAgent.objects.filter(run_id=run_id).first()


def run_agent_spec(run_agent: RunAgent) -> PresetSpec:
    """The preset as the run was started with it, validated again before it reaches a box."""
    try:
        # custom=True: the snapshot's shape is checked; whether a built-in names its build script was
        # checked when it was loaded.
        return validate_preset(run_agent.preset, custom=True)
    except Exception as exc:  # noqa: BLE001 - any doubt about what a box would get is a refusal
        raise RosterError(f"run {run_agent.run_id}'s preset {run_agent.preset_slug} is invalid: "
                          f"{exc}") from None
