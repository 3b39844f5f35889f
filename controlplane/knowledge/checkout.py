"""A run's plain checkout of its worker's knowledge (docs/knowledge.md): dispatch opens it when it assembles
the run's input (the head commit, writable only for a run that carried no conversation content: the
mount, not a text filter, keeps person-data out of the world store), writes the files into the run's
directory, and collects the change when the box has ended. Dispatch imports this module but never
proposals (pyproject's contract), so what becomes of a collected change is registered here by the
knowledge app (`register_change_sink`), as apps add executors to proposals."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.audit.services import audit_append
from controlplane.fleet.models import Run
from controlplane.knowledge import repo as git
from controlplane.knowledge.models import Checkout
from controlplane.knowledge.validation import change_problems, encoded, path_problem

log = logging.getLogger(__name__)
MOUNT = "/knowledge"
_SINKS: list[Callable[[Checkout, dict], str]] = []


def register_change_sink(sink: Callable[[Checkout, dict], str]) -> None:
    """The knowledge app's proposer: given the checkout and its valid change, returns the outcome line."""
    if sink not in _SINKS:
        _SINKS.append(sink)


def checkout_open(run: Run, *, writable: bool) -> dict:
    """Record the run's checkout at its worker's head; input.json's `knowledge` (docs/architecture.md)."""
    repo = git.repo_ensure(run.worker.name)
    base = git.head(repo)
    Checkout.objects.update_or_create(run=run, defaults={"worker": run.worker, "base_commit": base,
                                                         "writable": writable})
    return {"path": MOUNT, "commit": base, "writable": writable}


def checkout_write(run_id: int, dest: Path) -> bool | None:
    """The run's checkout written at dest (files only); its writable flag, or None for a run without one.
    A writable checkout belongs to the box's user, a read-only one stays root's (the mount is read-only
    too)."""
    checkout = Checkout.objects.select_related("worker").filter(run_id=run_id).first()
    if checkout is None:
        return None
    git.archive_to(git.repo_path(checkout.worker.name), checkout.base_commit, dest)
    uid = settings.ROSTER_BOX_UID
    for where, dirs, files in os.walk(dest):
        for name in [*dirs, *files, ""]:
            path = Path(where) / name if name else Path(where)
            os.chmod(path, 0o755 if path.is_dir() else 0o644)  # noqa: S103 - the box reads its checkout
            if checkout.writable and os.geteuid() == 0:
                os.chown(path, uid, uid)
    if checkout.writable and os.geteuid() != 0:
        os.chmod(dest, 0o777)  # noqa: S103 - unprivileged test runs: the box user must write here
    return checkout.writable


def _read_tree(root: Path) -> tuple[dict[str, bytes], list[str]]:
    """The files the box left, read without following any link (the box is gone: nothing moves now)."""
    found, problems = {}, []
    budget = settings.ROSTER_KNOWLEDGE_CHANGE_MAX_BYTES
    for where, dirs, files in os.walk(root, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(where) / name
            rel = path.relative_to(root).as_posix()
            mode = os.lstat(path).st_mode
            why = path_problem(rel)
            if why:
                problems.append(f"{rel!r}: {why}")
            elif stat.S_ISLNK(mode):
                problems.append(f"{rel!r}: a symlink")
            elif not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                problems.append(f"{rel!r}: not a regular file")
            elif stat.S_ISREG(mode):
                size = os.lstat(path).st_size
                if size > settings.ROSTER_KNOWLEDGE_FILE_MAX_BYTES or size > budget:
                    problems.append(f"{rel!r}: {size} bytes; a file is at most "
                                    f"{settings.ROSTER_KNOWLEDGE_FILE_MAX_BYTES}, a change "
                                    f"{settings.ROSTER_KNOWLEDGE_CHANGE_MAX_BYTES}")
                    continue
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as handle:
                    found[rel] = handle.read(size + 1)
                budget -= size
        dirs[:] = [d for d in dirs if not os.path.islink(Path(where) / d) and d.lower() != ".git"]
    return found, problems


def change_of(checkout: Checkout, root: Path) -> tuple[dict, list[str]]:
    """The checkout against its base commit: the payload of a knowledge_change and what is wrong with it."""
    repo = git.repo_path(checkout.worker.name)
    base_files = git.files_at(repo, checkout.base_commit)
    found, problems = _read_tree(root)
    files = []
    for path, data in sorted(found.items()):
        if path not in base_files:
            files.append(encoded(path, "add", data))
        elif git.blob_id(data) != base_files[path]:
            files.append(encoded(path, "change", data))
    files += [encoded(path, "delete", None) for path in sorted(set(base_files) - set(found))]
    change = {"base_commit": checkout.base_commit, "files": files}
    return change, problems + (change_problems(files) if files else [])


def checkout_collect(run_id: int, root: Path) -> str:
    """At box end: a writable checkout's change goes to the registered sink (a knowledge_change proposal);
    an invalid one is refused, audited, and never proposed. Returns the outcome line."""
    checkout = Checkout.objects.select_related("worker", "run").filter(run_id=run_id).first()
    if checkout is None or not checkout.writable or checkout.collected_at is not None:
        return ""
    if not root.is_dir():
        outcome = "no checkout left to collect"
        change, problems = {"files": []}, []
    else:
        change, problems = change_of(checkout, root)
        outcome = "no change" if not change["files"] and not problems else ""
    with transaction.atomic():
        if problems:
            outcome = "refused: " + "; ".join(problems)[:480]
            audit_append("knowledge", {"action": "refused", "run": run_id, "worker": checkout.worker.name,
                                       "base_commit": checkout.base_commit, "problems": problems[:20]},
                         run=checkout.run, worker=checkout.worker, verdict="deny")
        elif not outcome:
            outcome = "; ".join(sink(checkout, change) for sink in _SINKS) or "no proposer registered"
        Checkout.objects.filter(pk=checkout.pk).update(collected_at=timezone.now(), outcome=outcome[:500])
    return outcome
