"""A preset's files, set up in $HOME before the agent starts (docs/presets.md). The trusted side writes
each one read-only under /config/preset/<path> and lists them in /config/preset.json; here each `copy` is
copied into $HOME (the agent's own scratch: it may write there, and nothing it writes is ever read back as
enforcement state, invariant 10) and each `link` becomes a symlink to the read-only original. A path that
would leave $HOME is refused, and the box does not start."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

MANIFEST = Path("/config/preset.json")
PRESET_DIR = Path("/config/preset")
PROMPT_FILE = Path("/config/prompt.md")


class PresetSetupError(Exception):
    """The preset's files cannot be set up as listed; the message says which and why."""


def _safe(path: object) -> str:
    if not isinstance(path, str) or not path or path.startswith("/") or "\\" in path or "\x00" in path:
        raise PresetSetupError(f"preset file {path!r} is not a path relative to $HOME")
    if any(part in ("", ".", "..") for part in path.split("/")):
        raise PresetSetupError(f"preset file {path!r} would leave $HOME")
    return path


def manifest(path: Path | None = None) -> dict:
    """The preset's manifest, or {} for a run without a preset."""
    path = MANIFEST if path is None else path
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text())
    except ValueError as exc:
        raise PresetSetupError(f"{path} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("files", []), list):
        raise PresetSetupError(f"{path} is not a preset manifest")
    return doc


def set_up(doc: dict, home: Path, source: Path | None = None) -> list[str]:
    """Copy or link each listed file into `home`; returns what it did, one line per file."""
    source = PRESET_DIR if source is None else source
    done = []
    for item in doc.get("files", []):
        if not isinstance(item, dict):
            raise PresetSetupError("a preset manifest entry is not an object")
        rel, mode = _safe(item.get("path")), item.get("mode")
        original, target = source / rel, home / rel
        if not original.is_file():
            raise PresetSetupError(f"preset file {rel} is listed but missing from {source}")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.parent.resolve().is_relative_to(home.resolve()):
            raise PresetSetupError(f"preset file {rel}: a directory on its way is a link out of $HOME")
        if target.exists() or target.is_symlink():
            target.unlink()
        if mode == "copy":
            shutil.copyfile(original, target)
            os.chmod(target, 0o600)
        elif mode == "link":
            target.symlink_to(original)
        else:
            raise PresetSetupError(f"preset file {rel}: unknown mode {mode!r}")
        done.append(f"{mode} {rel}")
    return done


def stdin_from(doc: dict, prompt: Path | None = None) -> None:
    """With `stdin = "prompt"`, the run's prompt is the agent's standard input."""
    prompt = PROMPT_FILE if prompt is None else prompt
    if doc.get("stdin", "none") == "none":
        return
    if doc.get("stdin") != "prompt":
        raise PresetSetupError(f"unknown stdin {doc.get('stdin')!r}")
    fd = os.open(prompt, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
