"""A preset made concrete for one run: the image, argv, environment and files its box gets, with every
placeholder filled from the run's facts. Pure (no database, no Docker): dispatch calls it and applies the
result without knowing which agent it is."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from controlplane.agents import placeholders
from controlplane.agents.spec import PresetSpec
from controlplane.core.errors import RosterError

WORKSPACE = "/workspace"
PROMPT_FILE = "/config/prompt.md"
INPUT_FILE = "/config/input.json"
PRESET_DIR = "/config/preset"


@dataclass(frozen=True)
class RenderedFile:
    path: str  # relative to $HOME and to /config/preset
    mode: str
    content: str


@dataclass(frozen=True)
class AgentPlan:
    preset: str
    wire: str
    image: str
    build: str
    command: tuple[str, ...]
    stdin: str
    env: dict[str, str]
    files: tuple[RenderedFile, ...]
    key_variable: str
    answer: str
    model: str
    base_url: str

    def manifest(self) -> dict:
        """What the box runtime reads from /config/preset.json (never enforcement state: invariant 10)."""
        return {"preset": self.preset, "stdin": self.stdin,
                "files": [{"path": f.path, "mode": f.mode} for f in self.files]}


def box_tag(box_image: str) -> str:
    """The tag of the base box image (`latest` when it names none), for a preset's `{box_tag}`."""
    name = box_image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else "latest"


def preset_image(spec: PresetSpec, box_image: str) -> str:
    """The image holding the preset's agent: its own, a layer built from its packages, or the base."""
    if spec.image:
        return placeholders.fill(spec.image, {"box_tag": box_tag(box_image)})
    if spec.npm_packages or spec.pypi_packages:
        packages = "\n".join(["npm", *spec.npm_packages, "pypi", *spec.pypi_packages])
        digest = hashlib.sha256(packages.encode()).hexdigest()[:12]
        return f"roster-box-custom-{spec.slug}:{box_tag(box_image)}-{digest}"
    return box_image


def preset_build_hint(spec: PresetSpec) -> str:
    if spec.image:
        return spec.build
    if spec.npm_packages or spec.pypi_packages:
        return f".venv/bin/python manage.py preset build {spec.slug}"
    return "workers/build.sh"


def resolved_model(spec: PresetSpec, model: str) -> str:
    return model or spec.default_model or settings.ROSTER_AGENT_MODEL


def resolved_base_url(spec: PresetSpec, base_url: str) -> str:
    return (base_url or spec.default_base_url or settings.ROSTER_AGENT_BASE_URL).rstrip("/")


def base_path(base_url: str) -> str:
    return urlsplit(base_url).path.rstrip("/")


def plan_for(spec: PresetSpec, *, model: str, base_url: str, prompt: str, box_image: str,
             worker_image: str = "", worker_env: dict[str, str] | None = None) -> AgentPlan:
    """The box a run of `spec` gets. `model`/`base_url`: the run's (empty: the preset's defaults);
    `prompt`: the text of /config/prompt.md; the worker's image and environment win over the preset's
    (both validated when saved: neither can name a variable Roster sets)."""
    model, base_url = resolved_model(spec, model), resolved_base_url(spec, base_url)
    values = {"prompt_file": PROMPT_FILE, "input_file": INPUT_FILE, "model": model, "base_url": base_url,
              "key_variable": spec.key_variable, "workspace": WORKSPACE}
    if any("{prompt}" in arg for arg in spec.command):
        limit = settings.ROSTER_PRESET_PROMPT_ARG_MAX_BYTES
        if len(prompt.encode()) > limit:
            raise RosterError(f"the run's prompt is {len(prompt.encode())} bytes, more than a command "
                              f"argument may carry here ({limit}, ROSTER_PRESET_PROMPT_ARG_MAX_BYTES); "
                              f"preset {spec.slug} should read {{prompt_file}} or take stdin = \"prompt\"")
        if "\x00" in prompt:
            raise RosterError("the run's prompt contains NUL, which no command argument can carry")
    command = tuple(placeholders.fill(arg, {**values, "prompt": prompt}) for arg in spec.command)
    env = {name: placeholders.fill(value, values) for name, value in spec.env.items()}
    env.update(worker_env or {})
    files = tuple(RenderedFile(f.path, f.mode, placeholders.fill(f.content, values)) for f in spec.files)
    return AgentPlan(preset=spec.slug, wire=spec.wire, image=worker_image or preset_image(spec, box_image),
                     build=preset_build_hint(spec) if not worker_image else "", command=command,
                     stdin=spec.stdin,
                     env=env, files=files, key_variable=spec.key_variable, answer=spec.answer, model=model,
                     base_url=base_url)
