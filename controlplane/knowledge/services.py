"""Repair of the world store (P4: "records reverted"): a run's knowledge commits reverted by one new commit,
audited as `repair` naming the run, from `knowledge revert-run` and the run timeline; and what an admin
reads of a worker's store (`knowledge log`, `knowledge show`). A revert that would undo a later change of
the same file is refused with the file named: nothing is overwritten silently."""

from __future__ import annotations

from django.db import transaction

from controlplane.audit.services import audit_append
from controlplane.core.errors import RosterError
from controlplane.fleet.models import Run, Worker
from controlplane.knowledge import repo as git
from controlplane.knowledge.models import Commit


class RevertRefused(RosterError):
    """The run's commits cannot be reverted as asked (none left, or a later change conflicts)."""


def revert_changes(repo, commits: list[Commit]) -> dict[str, bytes | None]:
    """Each path the run's commits touched, set back to what it was before the oldest of them that touched
    it; a path another commit changed since is a conflict."""
    history = [e.commit for e in git.log(repo, limit=100000)]  # newest first
    ours = {c.sha for c in commits}
    age = {c.sha: history.index(c.sha) for c in commits if c.sha in history}
    if len(age) != len(commits):
        raise RevertRefused("a commit of this run is not on the worker's branch any more")
    changes: dict[str, bytes | None] = {}
    for commit in sorted(commits, key=lambda c: age[c.sha], reverse=True):  # oldest first
        for path in commit.paths:
            changes.setdefault(path, git.blob(repo, commit.parent, path))
    touched_since = set()
    for sha in history[: max(age.values())]:
        if sha not in ours:
            touched_since |= git.changed_paths(repo, f"{sha}~1", sha)
    conflicts = sorted(touched_since & set(changes))
    if conflicts:
        raise RevertRefused(f"a later commit changed {', '.join(conflicts[:10])} again: revert that one "
                            f"first, or edit the files by hand")
    return changes


def knowledge_revert_run(run_id: int, *, by: str, reason: str = "") -> Commit:
    """One new commit undoing every commit the run's changes made; the run's commits are marked reverted."""
    with transaction.atomic():
        run = Run.objects.select_related("worker").get(pk=run_id)
        commits = list(Commit.objects.select_for_update().filter(run=run, kind=Commit.Kind.CHANGE,
                                                                  reverted_by=""))
        if not commits:
            raise RevertRefused(f"run {run_id} has no knowledge commit left to revert")
        repo = git.repo_ensure(run.worker.name)
        head = git.head(repo)
        changes = revert_changes(repo, commits)
        shas = [c.sha for c in commits]
        message = (f"Revert the knowledge commits of run {run_id}\n\n"
                   + "".join(f"reverts {sha}\n" for sha in shas)
                   + (f"reason: {reason[:300]}\n" if reason else "")
                   + f"\nRoster-Reverts-Run: {run_id}\nRoster-Worker: {run.worker.name}\n"
                   + f"Roster-Repair-By: {by}\n")
        sha = git.commit_files(repo, head, changes, message)
        revert = Commit.objects.create(worker=run.worker, sha=sha, parent=head, kind=Commit.Kind.REVERT,
                                       run=run, paths=sorted(changes), by=by)
        Commit.objects.filter(pk__in=[c.pk for c in commits]).update(reverted_by=sha)
        audit_append("repair", {"action": "revert_knowledge", "repairs": run_id, "run": run_id,
                                "worker": run.worker.name, "commits": shas, "commit": sha,
                                "paths": sorted(changes)[:50], "by": by, "reason": reason[:300]},
                     run=run, worker=run.worker)
        git.branch_move(repo, sha, head)  # last: a failed move raises and rolls the records back
    return revert


def knowledge_log(worker_name: str, limit: int = 50, path: str = "") -> list[git.LogEntry]:
    Worker.objects.get(name=worker_name)
    return git.log(git.repo_ensure(worker_name), limit=limit, path=path)


def knowledge_show(worker_name: str, path: str, commit: str = "") -> bytes | None:
    Worker.objects.get(name=worker_name)
    repo = git.repo_ensure(worker_name)
    return git.blob(repo, commit or git.head(repo), path)
