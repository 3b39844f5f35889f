"""Configuration kept as TOML files, one object per file, its key the file stem (grants, destinations:
docs/grants.md, docs/proposals.md). Reading uses tomllib and writing tomli_w; both directions go through
the kind's own validation and file form, so a file that exports imports back identically. A check lists
every bad file and field; an import is all-or-nothing."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w
from django.conf import settings
from django.core.management.base import CommandError
from django.db import transaction

from controlplane.core.errors import RosterError, ValidationFailed

SUFFIX = ".toml"


@dataclass(frozen=True)
class FileError:
    path: Path
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.field}: {self.message}"


@dataclass
class LoadResult:
    specs: list = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)


class FilesInvalid(RosterError):
    """A directory with at least one bad file: every bad file and field, listed; nothing was applied."""

    def __init__(self, errors: list[FileError]):
        self.errors = errors
        super().__init__("\n".join(map(str, errors)))


@dataclass(frozen=True)
class TomlFiles:
    """One kind of object as files. `validate(data, key)` returns a spec or raises ValidationFailed;
    `save(spec, actor=, via=)` returns (object, "created" | "updated" | "unchanged"); `delete(obj,
    actor=, via=)`; `stored()` every stored object, in key order."""

    what: str  # "grant", "destination": in messages and in the audit's `via`
    key_pattern: re.Pattern
    validate: Callable
    spec_key: Callable
    save: Callable
    delete: Callable
    stored: Callable
    key_of: Callable
    to_data: Callable[..., dict]

    def load_dir(self, directory: Path) -> LoadResult:
        """Parse and validate every *.toml file in `directory` (not recursive)."""
        result = LoadResult()
        directory = Path(directory)
        if not directory.is_dir():
            result.errors.append(FileError(directory, "directory", "not a directory"))
            return result
        limit = settings.ROSTER_GRANT_FILE_MAX_BYTES
        for path in sorted(directory.glob("*" + SUFFIX)):
            if not path.is_file():
                result.errors.append(FileError(path, "file", "not a regular file"))
                continue
            if path.stat().st_size > limit:
                result.errors.append(FileError(path, "file", f"larger than {limit} bytes"))
                continue
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                result.errors.append(FileError(path, "toml", f"not valid TOML: {exc}"))
                continue
            try:
                result.specs.append(self.validate(data, path.stem))
            except ValidationFailed as exc:
                result.errors.extend(FileError(path, f, m) for f, m in exc.errors.items())
        return result

    def import_dir(self, directory: Path, *, prune: bool = False, actor: str = "") -> dict[str, list[str]]:
        """Apply every file in one transaction, or nothing if any file is wrong. With `prune`, stored
        objects that have no file are deleted. Returns keys by action."""
        loaded = self.load_dir(directory)
        if loaded.errors:
            raise FilesInvalid(loaded.errors)
        summary: dict[str, list[str]] = {"created": [], "updated": [], "unchanged": [], "deleted": []}
        via = f"{self.what}s import"
        with transaction.atomic():
            for spec in loaded.specs:
                _obj, action = self.save(spec, actor=actor, via=via)
                summary[action].append(self.spec_key(spec))
            if prune:
                keep = {self.spec_key(spec) for spec in loaded.specs}
                for obj in self.stored():
                    if self.key_of(obj) not in keep:
                        self.delete(obj, actor=actor, via=via + " --prune")
                        summary["deleted"].append(self.key_of(obj))
        return summary

    def dumps(self, obj) -> str:
        return tomli_w.dumps(self.to_data(obj))

    def export_dir(self, directory: Path) -> list[Path]:
        """Write one <key>.toml per stored object. Existing files for those keys are replaced (each
        through a temporary file, so a reader never sees half of one); other files are left."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        for obj in self.stored():
            key = self.key_of(obj)
            if not self.key_pattern.match(key):
                raise RosterError(f"{self.what} {key!r} cannot be a file name; fix it in the admin first")
            path = directory / f"{key}{SUFFIX}"
            tmp = path.with_suffix(SUFFIX + ".tmp")
            tmp.write_text(self.dumps(obj), encoding="utf-8")
            tmp.replace(path)
            written.append(path)
        return written

    def command(self, action: str, directory: Path, *, prune: bool = False) -> list[str]:
        """`check`, `import` or `export` DIR for a management command: the lines it prints, or a
        CommandError (exit 1) naming every bad file and field."""
        if action == "check":
            loaded = self.load_dir(directory)
            if loaded.errors:
                raise CommandError("\n".join(map(str, loaded.errors)), returncode=1)
            return [f"{len(loaded.specs)} {self.what} file(s) OK"]
        if action == "import":
            try:
                summary = self.import_dir(directory, prune=prune, actor="cli")
            except FilesInvalid as exc:
                raise CommandError("nothing imported:\n" + str(exc), returncode=1) from None
            return [f"{key}: {len(keys)}" + (f" ({', '.join(keys)})" if keys else "")
                    for key, keys in summary.items()]
        if action == "export":
            try:
                written = self.export_dir(directory)
            except RosterError as exc:
                raise CommandError(str(exc), returncode=1) from None
            return [f"wrote {len(written)} {self.what} file(s) to {directory}"]
        raise ValueError(f"unknown file action {action!r}")
