"""Grants as TOML files, one grant per file, id = file stem (docs/grants.md). Reading uses tomllib, writing
tomli_w; both sides go through controlplane.policy.validation, so a file that exports imports back
identically. Import is all-or-nothing."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w
from django.conf import settings
from django.db import transaction

from controlplane.core.errors import RosterError, ValidationFailed
from controlplane.policy.grant_services import grant_delete, grant_save
from controlplane.policy.models import Grant
from controlplane.policy.validation import SLUG_RE, GrantSpec, grant_to_data, validate_grant

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
    specs: list[GrantSpec] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)


class GrantFilesInvalid(RosterError):
    def __init__(self, errors: list[FileError]):
        self.errors = errors
        super().__init__("\n".join(map(str, errors)))


def load_dir(directory: Path) -> LoadResult:
    """Parse and validate every *.toml file in `directory` (not recursive)."""
    result = LoadResult()
    directory = Path(directory)
    if not directory.is_dir():
        result.errors.append(FileError(directory, "directory", "not a directory"))
        return result
    for path in sorted(directory.glob("*" + SUFFIX)):
        if not path.is_file():
            result.errors.append(FileError(path, "file", "not a regular file"))
            continue
        if path.stat().st_size > settings.ROSTER_GRANT_FILE_MAX_BYTES:
            limit = settings.ROSTER_GRANT_FILE_MAX_BYTES
            result.errors.append(FileError(path, "file", f"larger than {limit} bytes"))
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            result.errors.append(FileError(path, "toml", f"not valid TOML: {exc}"))
            continue
        try:
            result.specs.append(validate_grant(data, slug=path.stem))
        except ValidationFailed as exc:
            result.errors.extend(FileError(path, f, m) for f, m in exc.errors.items())
    return result


def import_dir(directory: Path, *, prune: bool = False, actor: str = "") -> dict[str, list[str]]:
    """Apply every file in one transaction, or nothing if any file is wrong. With `prune`, grants that
    have no file are deleted. Returns slugs by action."""
    loaded = load_dir(directory)
    if loaded.errors:
        raise GrantFilesInvalid(loaded.errors)
    summary: dict[str, list[str]] = {"created": [], "updated": [], "unchanged": [], "deleted": []}
    with transaction.atomic():
        for spec in loaded.specs:
            _grant, action = grant_save(spec, actor=actor, via="grants import")
            summary[action].append(spec.slug)
        if prune:
            keep = {spec.slug for spec in loaded.specs}
            for grant in Grant.objects.exclude(slug__in=keep).select_related("worker", "secret"):
                grant_delete(grant, actor=actor, via="grants import --prune")
                summary["deleted"].append(grant.slug)
    return summary


def dumps(grant: Grant) -> str:
    return tomli_w.dumps(grant_to_data(grant))


def export_dir(directory: Path) -> list[Path]:
    """Write one <slug>.toml per grant. Existing files for those slugs are replaced; others are left."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for grant in Grant.objects.select_related("worker", "secret").order_by("slug"):
        if not SLUG_RE.match(grant.slug):
            raise RosterError(f"grant id {grant.slug!r} cannot be a file name; fix it in the admin first")
        path = directory / f"{grant.slug}{SUFFIX}"
        tmp = path.with_suffix(SUFFIX + ".tmp")
        tmp.write_text(dumps(grant), encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    return written
