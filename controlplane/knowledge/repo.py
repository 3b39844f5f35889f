"""The worker's world store: one bare Git repository per worker under ROSTER_KNOWLEDGE_DIR, driven through
the git CLI with a fixed environment (no system or user configuration, no hooks, no prompts), so what a
commit holds depends on Roster alone. The repository never leaves the trusted side: a run gets a plain
checkout (`archive_to`: files only, no `.git`, no history; docs/knowledge.md). Commits are made with
plumbing on a throwaway index, never in a work tree, and the branch moves only by compare-and-swap."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from controlplane.core.errors import RosterError

BRANCH = "refs/heads/main"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_IDENTITY = {"GIT_AUTHOR_NAME": "Roster", "GIT_AUTHOR_EMAIL": "roster@roster.invalid",
             "GIT_COMMITTER_NAME": "Roster", "GIT_COMMITTER_EMAIL": "roster@roster.invalid"}


class GitFailed(RosterError):
    """A git command failed (its stderr, bounded, is the message: never a file's content)."""


@dataclass(frozen=True)
class LogEntry:
    commit: str
    date: str
    message: str


def _env(extra: dict | None = None) -> dict:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": "/nonexistent",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
            **_IDENTITY, **(extra or {})}


def git(repo: Path, *args: str, data: bytes | None = None, extra: dict | None = None) -> bytes:
    result = subprocess.run(["git", f"--git-dir={repo}", "-c", "core.hooksPath=/dev/null",
                             # compose: the dispatcher (root) and the web (roster) share the volume
                             "-c", "safe.directory=*", *args],  # noqa: S603, S607
                            input=data, capture_output=True, env=_env(extra), timeout=60, check=False)
    if result.returncode != 0:
        raise GitFailed(f"git {args[0]}: {result.stderr.decode('utf-8', 'replace').strip()[:300]}")
    return result.stdout


def repo_path(worker_name: str) -> Path:
    # Worker names are slugs (fleet.Worker's validator): never a path of their own.
    return Path(settings.ROSTER_KNOWLEDGE_DIR) / f"{worker_name}.git"


def repo_ensure(worker_name: str) -> Path:
    """The worker's repository, made on first use with one empty commit, so every run has a head."""
    repo = repo_path(worker_name)
    if (repo / "HEAD").is_file() and head(repo):
        return repo
    repo.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(repo.parent, 0o700)  # the world store is the trusted side's alone
    subprocess.run(["git", "init", "--bare", "--quiet", "--initial-branch=main", str(repo)],  # noqa: S603, S607
                   capture_output=True, env=_env(), timeout=60, check=True)
    first = git(repo, "commit-tree", EMPTY_TREE, "-m",
                f"Knowledge repository of worker {worker_name}\n\nRoster-Worker: {worker_name}\n").strip()
    git(repo, "update-ref", BRANCH, first.decode(), "0" * 40)
    return repo


def head(repo: Path) -> str:
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", BRANCH).decode().strip()
    except GitFailed:
        return ""


def blob_id(data: bytes) -> str:
    """Git's id of a blob with these bytes, computed here so a checkout is compared without a subprocess
    per file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def files_at(repo: Path, commit: str) -> dict[str, str]:
    """path -> blob id of every file in the commit."""
    out = {}
    for entry in git(repo, "ls-tree", "-r", "-z", "--full-tree", commit).split(b"\0"):
        if not entry:
            continue
        meta, path = entry.split(b"\t", 1)
        out[path.decode("utf-8", "surrogateescape")] = meta.split()[2].decode()
    return out


def blob(repo: Path, commit: str, path: str) -> bytes | None:
    try:
        return git(repo, "cat-file", "blob", f"{commit}:{path}")
    except GitFailed:
        return None


def changed_paths(repo: Path, old: str, new: str) -> set[str]:
    if old == new:
        return set()
    names = git(repo, "diff", "--name-only", "--no-renames", "-z", old, new).split(b"\0")
    return {n.decode("utf-8", "surrogateescape") for n in names if n}


def commit_files(repo: Path, parent: str, changes: dict[str, bytes | None], message: str) -> str:
    """A new commit on `parent` with each path set to its bytes (None: deleted), not on the branch yet:
    the caller records it, then moves the branch (`branch_move`) as the last step of its transaction."""
    with tempfile.TemporaryDirectory(prefix="roster-knowledge-") as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo, "read-tree", parent, extra=index)
        lines = []
        for path, data in sorted(changes.items()):
            if data is None:  # mode 0: out of the index (no work tree needed, unlike --force-remove)
                lines.append(f"0 {'0' * 40}\t{path}\0")
            else:
                blob_sha = git(repo, "hash-object", "-w", "--stdin", data=data).decode().strip()
                lines.append(f"100644 {blob_sha}\t{path}\0")
        git(repo, "update-index", "-z", "--index-info", data="".join(lines).encode("utf-8"), extra=index)
        tree = git(repo, "write-tree", extra=index).decode().strip()
    return git(repo, "commit-tree", tree, "-p", parent, data=message.encode("utf-8")).decode().strip()


def branch_move(repo: Path, new: str, old: str) -> None:
    """The branch to `new` only if it still points at `old` (a concurrent commit makes this fail, and
    neither is lost)."""
    git(repo, "update-ref", BRANCH, new, old)


def archive_to(repo: Path, commit: str, dest: Path) -> None:
    """The commit's files written under dest: a plain checkout, no `.git`, no history."""
    dest.mkdir(parents=True, exist_ok=True)
    if not files_at(repo, commit):
        return  # an empty tree's archive is a bare header tarfile cannot read; nothing to write anyway
    data = git(repo, "archive", "--format=tar", commit)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")  # our own archive; the filter refuses links and escapes anyway


def log(repo: Path, limit: int = 50, path: str = "") -> list[LogEntry]:
    args = ["log", f"--max-count={limit}", "--format=%H%x00%cI%x00%B%x1e", BRANCH]
    if path:
        args += ["--", path]
    out = []
    for item in git(repo, *args).decode("utf-8", "replace").split("\x1e"):
        item = item.strip("\n")
        if item:
            commit, date, message = item.split("\x00", 2)
            out.append(LogEntry(commit=commit, date=date, message=message.strip()))
    return out
