"""Built-in presets as files: `workers/presets/<slug>/preset.toml` (ROSTER_PRESETS_DIR), one per directory,
the directory name its slug. Reading only: the files are the source and the rows their copy; the admin
shows built-ins read-only. Every problem is named with its file and key."""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from controlplane.agents.spec import PresetSpec, validate_preset
from controlplane.core.errors import RosterError, ValidationFailed

FILE_NAME = "preset.toml"


@dataclass(frozen=True)
class FileError:
    path: Path
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.field}: {self.message}"


@dataclass(frozen=True)
class LoadedPreset:
    spec: PresetSpec
    source: str  # the file, relative to the repository when it is inside it
    sha256: str


@dataclass
class LoadResult:
    presets: list[LoadedPreset] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)


class PresetFilesInvalid(RosterError):
    def __init__(self, errors: list[FileError]):
        self.errors = errors
        super().__init__("\n".join(map(str, errors)))


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(settings.BASE_DIR))
    except ValueError:
        return str(path)


def _build_problem(spec: PresetSpec) -> str:
    """A built-in's `build` names a script in the repository (it is printed in refusals: it must exist)."""
    if not spec.image:
        return ""
    script = spec.build.split()[0] if spec.build.split() else ""
    if script.endswith(".sh") and not (settings.BASE_DIR / script).is_file():
        return f"{script} does not exist"
    return ""


def load_file(path: Path, *, slug: str | None = None) -> LoadedPreset:
    """One preset file, validated; PresetFilesInvalid naming every problem."""
    path = Path(path)
    limit = settings.ROSTER_PRESET_FILE_MAX_BYTES
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PresetFilesInvalid([FileError(path, "file", f"cannot be read: {exc.strerror}")]) from None
    if len(raw) > limit:
        raise PresetFilesInvalid([FileError(path, "file", f"larger than {limit} bytes")])
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PresetFilesInvalid([FileError(path, "toml", f"not valid TOML: {exc}")]) from None
    try:
        spec = validate_preset(data, slug=slug)
    except ValidationFailed as exc:
        raise PresetFilesInvalid([FileError(path, k, m) for k, m in exc.errors.items()]) from None
    problem = _build_problem(spec)
    if problem:
        raise PresetFilesInvalid([FileError(path, "build", problem)])
    return LoadedPreset(spec=spec, source=_relative(path), sha256=hashlib.sha256(raw).hexdigest())


def load_dir(directory: Path | None = None) -> LoadResult:
    """Every `<slug>/preset.toml` under the directory (default ROSTER_PRESETS_DIR)."""
    directory = Path(directory or settings.ROSTER_PRESETS_DIR)
    result = LoadResult()
    if not directory.is_dir():
        result.errors.append(FileError(directory, "directory", "not a directory"))
        return result
    for sub in sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")):
        path = sub / FILE_NAME
        if not path.is_file():
            continue  # a directory of shared build helpers, not a preset
        try:
            result.presets.append(load_file(path, slug=sub.name))
        except PresetFilesInvalid as exc:
            result.errors.extend(exc.errors)
    return result
