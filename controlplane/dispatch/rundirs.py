"""Host directories a box mounts: the worker's code and the run's config and trust store, all read-only.
Per-run directories go when the run ends. (The writable workspace is a size-limited tmpfs, not a host
directory, so a box cannot fill the host's disk.) A preset's files go under /config/preset/ with their
list in /config/preset.json: read-only like the rest of /config (invariant 4); the box runtime copies
the ones the agent must write into $HOME (workers/runtime)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from django.conf import settings

from controlplane.agents.rendering import RenderedFile
from controlplane.agents.spec import file_path_problem
from controlplane.dispatch.agentbox import BoxPlan
from controlplane.dispatch.runinput import RunInput, prompt_text, run_input_document
from controlplane.fleet.models import Run
from controlplane.knowledge.checkout import checkout_write


@dataclass(frozen=True)
class RunDirs:
    root: Path
    code: Path
    config: Path
    ca_bundle: Path
    gateway_ca: Path
    knowledge: Path | None = None  # the run's knowledge checkout (controlplane.knowledge.checkout)
    knowledge_writable: bool = False


def run_dirs_path(run_id: int) -> Path:
    return settings.ROSTER_BOX_RUNS_DIR / f"{settings.ROSTER_BOX_NAMESPACE}-{run_id}"


def _preset_files(config: Path, files: tuple[RenderedFile, ...]) -> dict[Path, str]:
    """Each preset file at config/preset/<path>, its directories made (0755). A path that is not plainly
    inside (validated when saved; checked again here) is refused, never written."""
    base = config / "preset"
    out = {}
    for item in files:
        problem = file_path_problem(item.path)
        target = (base / item.path).resolve()
        if problem or not target.is_relative_to(base.resolve()):
            raise ValueError(f"preset file {item.path!r} would leave /config/preset: {problem or 'escapes'}")
        for parent in reversed(target.relative_to(base.resolve()).parents[:-1]):
            (base / parent).mkdir(exist_ok=True)
            os.chmod(base / parent, 0o755)  # noqa: S103 - the box user reads them; nothing secret
        out[base / item.path] = item.content
    return out


def run_dirs_create(run: Run, run_input: RunInput | None = None, plan: BoxPlan | None = None) -> RunDirs:
    """The run's directories with its read-only config: run.json, the run's input (input.json, prompt.md:
    controlplane.dispatch.runinput; a plain one for a run assembled elsewhere), the preset's files and
    their list (preset.json) when the run has a preset, and the CA files."""
    root = run_dirs_path(run.pk)
    shutil.rmtree(root, ignore_errors=True)  # leftovers of an earlier failed attempt are never reused
    code = settings.ROSTER_BOX_CODE_DIR / run.worker.name
    code.mkdir(parents=True, exist_ok=True)
    dirs = RunDirs(root=root, code=code, config=root / "config", ca_bundle=root / "ca-certificates.crt",
                   gateway_ca=root / "gateway-ca.pem")
    dirs.config.mkdir(parents=True, mode=0o755)
    os.chmod(root, 0o755)  # noqa: S103 - dockerd mounts from here; no secrets inside
    command = list(plan.command) if plan is not None else list(run.command)
    config = {"run_id": run.pk, "worker": run.worker.name, "command": command,
              "timeout_seconds": run.timeout_seconds, "origin": run.origin}
    if plan is not None and plan.preset:
        config.update(preset=plan.preset, model=plan.model, base_url=plan.base_url, image=plan.image)
    system = settings.ROSTER_BOX_SYSTEM_CA_BUNDLE
    public = system.read_text() if system.is_file() else ""
    gateway_ca = settings.ROSTER_GATEWAY_CA_CERT.read_text()
    # Copies, readable by the box user whatever the host files' modes are (certificates only, no keys).
    if run_input is None:
        document = run_input_document(run, None)
        run_input = RunInput(document=document, prompt=prompt_text(document))
    files = {dirs.config / "run.json": json.dumps(config, indent=2), dirs.gateway_ca: gateway_ca,
             dirs.config / "input.json": run_input.json_text, dirs.config / "prompt.md": run_input.prompt,
             dirs.ca_bundle: public.rstrip("\n") + "\n" + gateway_ca}
    if plan is not None and plan.manifest is not None:
        (dirs.config / "preset").mkdir()
        os.chmod(dirs.config / "preset", 0o755)  # noqa: S103 - read by the box user; nothing secret
        files[dirs.config / "preset.json"] = json.dumps(plan.manifest, indent=2)
        files.update(_preset_files(dirs.config, plan.files))
    for path, text in files.items():
        path.write_text(text)
        os.chmod(path, 0o644)  # noqa: S103 - public data the box must read
    if run_input.document.get("knowledge"):
        writable = checkout_write(run.pk, root / "knowledge")
        if writable is not None:
            dirs = replace(dirs, knowledge=root / "knowledge", knowledge_writable=writable)
    return dirs


def run_dirs_remove(run_id: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(run_dirs_path(run_id))
