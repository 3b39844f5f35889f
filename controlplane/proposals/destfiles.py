"""Destinations as TOML files, one per file, name = file stem, as grants are (controlplane.policy.grantfiles).
Both directions go through controlplane.proposals.validation; import is all-or-nothing."""

from __future__ import annotations

import tomllib
from pathlib import Path

import tomli_w
from django.conf import settings
from django.db import transaction

from controlplane.core.errors import RosterError, ValidationFailed
from controlplane.policy.grantfiles import FileError, GrantFilesInvalid
from controlplane.proposals.config_services import destination_delete, destination_save
from controlplane.proposals.models import Destination
from controlplane.proposals.validation import (
    NAME_RE,
    DestinationSpec,
    destination_to_data,
    validate_destination,
)

SUFFIX = ".toml"
DestinationFilesInvalid = GrantFilesInvalid  # same shape: every bad file and field, listed


def load_dir(directory: Path) -> tuple[list[DestinationSpec], list[FileError]]:
    specs: list[DestinationSpec] = []
    errors: list[FileError] = []
    directory = Path(directory)
    if not directory.is_dir():
        return specs, [FileError(directory, "directory", "not a directory")]
    for path in sorted(directory.glob("*" + SUFFIX)):
        if not path.is_file():
            errors.append(FileError(path, "file", "not a regular file"))
            continue
        if path.stat().st_size > settings.ROSTER_GRANT_FILE_MAX_BYTES:
            errors.append(
                FileError(path, "file", f"larger than {settings.ROSTER_GRANT_FILE_MAX_BYTES} bytes")
            )
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            errors.append(FileError(path, "toml", f"not valid TOML: {exc}"))
            continue
        try:
            specs.append(validate_destination(data, name=path.stem))
        except ValidationFailed as exc:
            errors.extend(FileError(path, f, m) for f, m in exc.errors.items())
    return specs, errors


def import_dir(directory: Path, *, prune: bool = False, actor: str = "") -> dict[str, list[str]]:
    specs, errors = load_dir(directory)
    if errors:
        raise DestinationFilesInvalid(errors)
    summary: dict[str, list[str]] = {"created": [], "updated": [], "unchanged": [], "deleted": []}
    with transaction.atomic():
        for spec in specs:
            _dest, action = destination_save(spec, actor=actor, via="destinations import")
            summary[action].append(spec.name)
        if prune:
            keep = {spec.name for spec in specs}
            for dest in Destination.objects.exclude(name__in=keep).select_related("secret"):
                destination_delete(dest, actor=actor, via="destinations import --prune")
                summary["deleted"].append(dest.name)
    return summary


def dumps(dest: Destination) -> str:
    return tomli_w.dumps(destination_to_data(dest))


def export_dir(directory: Path) -> list[Path]:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for dest in Destination.objects.select_related("secret").order_by("name"):
        if not NAME_RE.match(dest.name):
            raise RosterError(f"destination {dest.name!r} cannot be a file name; fix it in the admin first")
        path = directory / f"{dest.name}{SUFFIX}"
        tmp = path.with_suffix(SUFFIX + ".tmp")
        tmp.write_text(dumps(dest), encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    return written
