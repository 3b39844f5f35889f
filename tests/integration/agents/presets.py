"""A preset file (workers/presets/<slug>/preset.toml, the shared format) turned into what a box runs,
for the agent tests, until the control plane's own preset loader (controlplane/agents) dispatches it:
the command with its placeholders filled, the environment the preset adds, and its files written under
the run's read-only /config/preset/, copied or linked into $HOME when the box starts.

Dispatch is the real one (controlplane.dispatch.running.run_dispatch); `preset_applied` only adds what a
preset adds to the box it creates, and refuses what a preset may not do: set a variable Roster sets, or
write a file outside $HOME."""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import shlex
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field

from controlplane.agents import answers
from controlplane.dispatch import box as box_module
from tests.support import procs

PRESETS = procs.REPO / "workers" / "presets"
BOX_PRESET_DIR = "/config/preset"
PLACEHOLDERS = ("prompt", "prompt_file", "model", "base_url", "workspace", "key_variable")
# Set by Roster in every box (controlplane.dispatch.box.box_environment); a preset never overrides them.
ROSTER_VARIABLES = frozenset({
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "NO_PROXY",
    "no_proxy", "NODE_EXTRA_CA_CERTS", "NODE_USE_ENV_PROXY", "HOME", *box_module.CA_VARIABLES})


class PresetError(ValueError):
    pass


@dataclass(frozen=True)
class PresetFile:
    path: str  # relative to $HOME
    mode: str  # copy | link
    content: str


@dataclass(frozen=True)
class RenderedPreset:
    slug: str
    image: str
    wire: str
    answer: str
    key_variable: str
    command: list[str]
    env: dict[str, str]
    files: list[PresetFile] = field(default_factory=list)
    suggested_grant: dict = field(default_factory=dict)


def preset_load(slug: str) -> dict:
    with open(PRESETS / slug / "preset.toml", "rb") as fh:
        return tomllib.load(fh)


def _fill(text: str, values: dict[str, str]) -> str:
    # Only the named placeholders: JSON and TOML in a preset's files keep their own braces.
    return re.sub(r"\{(" + "|".join(PLACEHOLDERS) + r")\}", lambda m: values[m.group(1)], text)


def image_tag(preset: dict, base_image: str) -> str:
    """The layer's tag for this base: roster-box-pi:latest on roster-box:latest, roster-box-pi:hkits on
    roster-box:hkits (what workers/presets/layer.sh names it)."""
    if not preset["image"]:
        return base_image
    repo, _, tag = base_image.rpartition(":")
    return f"{repo}-{preset['slug']}:{tag}"


def preset_render(preset: dict, *, prompt: str, model: str, base_url: str, base_image: str) -> RenderedPreset:
    values = {"prompt": prompt, "prompt_file": "/config/prompt.md", "model": model, "base_url": base_url,
              "workspace": "/workspace", "key_variable": preset["key_variable"]}
    env = {name: _fill(value, values) for name, value in preset.get("env", {}).items()}
    overriding = sorted(n for n in env if n in ROSTER_VARIABLES or n.startswith("ROSTER_")
                        or n == preset["key_variable"])
    if overriding:
        raise PresetError(f"preset {preset['slug']} sets variables Roster sets: {overriding}")
    files = []
    for entry in preset.get("files", []):
        path = posixpath.normpath(entry["path"])
        if path.startswith(("/", "..")) or entry["mode"] not in ("copy", "link"):
            raise PresetError(f"preset {preset['slug']}: bad file {entry['path']!r} ({entry['mode']})")
        files.append(PresetFile(path=path, mode=entry["mode"], content=_fill(entry["content"], values)))
    return RenderedPreset(
        slug=preset["slug"], image=image_tag(preset, base_image), wire=preset["wire"],
        answer=preset["answer"], key_variable=preset["key_variable"],
        command=[_fill(part, values) for part in preset["command"]], env=env, files=files,
        suggested_grant=preset.get("suggested_grant", {}))


def box_command(rendered: RenderedPreset) -> list[str]:
    """The run's command: put the preset's files in $HOME (the workspace tmpfs, empty at start), then exec
    the agent. Without files, the agent's command as it is."""
    if not rendered.files:
        return rendered.command
    steps = []
    for entry in rendered.files:
        source, target = shlex.quote(f"{BOX_PRESET_DIR}/{entry.path}"), f'"$HOME"/{shlex.quote(entry.path)}'
        steps.append(f'mkdir -p "$(dirname {target})"')
        steps.append(f"cp {source} {target}" if entry.mode == "copy" else f"ln -s {source} {target}")
    return ["sh", "-c", " && ".join(steps) + ' && exec "$@"', rendered.slug, *rendered.command]


@contextlib.contextmanager
def preset_applied(monkeypatch, rendered: RenderedPreset, sentinel: str) -> Iterator[list[dict]]:
    """Every box dispatch creates meanwhile gets the preset's environment and files; yields the specs
    the boxes were created with (to check what the box held)."""
    created: list[dict] = []
    real = box_module.box_create_kwargs

    def with_preset(run, *, dirs, **kwargs):
        spec = real(run, dirs=dirs, **kwargs)
        env = spec["environment"]
        clash = sorted(set(rendered.env) & set(env))
        if clash:
            raise PresetError(f"preset {rendered.slug} would override {clash}")
        env.update(rendered.env)
        env[rendered.key_variable] = sentinel
        for entry in rendered.files:
            _write_readable(dirs.config, f"preset/{entry.path}", entry.content)
        created.append(spec)
        return spec

    monkeypatch.setattr(box_module, "box_create_kwargs", with_preset)
    yield created


def _write_readable(root, relative: str, content: str) -> None:
    """A file the box user can read (and nobody in the box can write: /config is mounted read-only)."""
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    os.chmod(target, 0o644)  # noqa: S103 - public: no secret is ever in a preset
    for parent in target.parents:
        if parent == root:
            break
        os.chmod(parent, 0o755)  # noqa: S103 - the box user must traverse it


def preset_image_build(slug: str, base_image: str) -> tuple[str, str]:
    """Build (or find up to date) the preset's layer on `base_image`: its tag, and what build.sh said."""
    preset = preset_load(slug)
    env = {**os.environ, "ROSTER_BOX_IMAGE": base_image}
    result = subprocess.run([str(procs.REPO / preset["build"])], env=env, capture_output=True, text=True,
                            timeout=1800, check=False)
    if result.returncode != 0:
        raise AssertionError(f"{preset['build']} failed:\n{result.stdout}\n{result.stderr}")
    return image_tag(preset, base_image), result.stdout.strip()


def answer_of(rule: str, output: str) -> str:
    """The run's answer as the preset's rule takes it from the output: the control plane's own reader
    (controlplane.agents.answers), so every rule a preset may name works here as it does on a run."""
    return answers.answer_from(answers.parse_rule(rule), output) or ""
