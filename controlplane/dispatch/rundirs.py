"""Host directories a box mounts: the worker's code and the run's config and trust store, all read-only.
Per-run directories go when the run ends. (The writable workspace is a size-limited tmpfs, not a host
directory, so a box cannot fill the host's disk.)"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from controlplane.fleet.models import Run


@dataclass(frozen=True)
class RunDirs:
    root: Path
    code: Path
    config: Path
    ca_bundle: Path
    gateway_ca: Path


def run_dirs_path(run_id: int) -> Path:
    return settings.ROSTER_BOX_RUNS_DIR / f"{settings.ROSTER_BOX_NAMESPACE}-{run_id}"


def run_dirs_create(run: Run) -> RunDirs:
    root = run_dirs_path(run.pk)
    shutil.rmtree(root, ignore_errors=True)  # leftovers of an earlier failed attempt are never reused
    code = settings.ROSTER_BOX_CODE_DIR / run.worker.name
    code.mkdir(parents=True, exist_ok=True)
    dirs = RunDirs(root=root, code=code, config=root / "config", ca_bundle=root / "ca-certificates.crt",
                   gateway_ca=root / "gateway-ca.pem")
    dirs.config.mkdir(parents=True, mode=0o755)
    os.chmod(root, 0o755)  # noqa: S103 - dockerd mounts from here; no secrets inside
    config = {"run_id": run.pk, "worker": run.worker.name, "command": list(run.command),
              "timeout_seconds": run.timeout_seconds, "origin": run.origin}
    system = settings.ROSTER_BOX_SYSTEM_CA_BUNDLE
    public = system.read_text() if system.is_file() else ""
    gateway_ca = settings.ROSTER_GATEWAY_CA_CERT.read_text()
    # Copies, readable by the box user whatever the host files' modes are (certificates only, no keys).
    files = {dirs.config / "run.json": json.dumps(config, indent=2), dirs.gateway_ca: gateway_ca,
             dirs.ca_bundle: public.rstrip("\n") + "\n" + gateway_ca}
    for path, text in files.items():
        path.write_text(text)
        os.chmod(path, 0o644)  # noqa: S103 - public data the box must read
    return dirs


def run_dirs_remove(run_id: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(run_dirs_path(run_id))
