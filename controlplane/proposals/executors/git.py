"""Push a proposed change to the destination's Git remote: clone, check out the proposal's base commit,
apply its patch (git am) or fetch its bundle, and push the result to the target branch, never forcing.
The credential reaches git through GIT_ASKPASS from this process's environment for the child only."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import tempfile
from pathlib import Path

from django.conf import settings

from controlplane.core.errors import RosterError
from controlplane.proposals.executors import Outcome, scrub
from controlplane.proposals.validation import branch_allowed

ASKPASS = """#!/bin/sh
case "$1" in
  Username*) printf '%s\\n' "${ROSTER_GIT_USERNAME:-x-access-token}" ;;
  *) printf '%s\\n' "$ROSTER_GIT_PASSWORD" ;;
esac
"""
# Answers from git that mean the remote or the network is away, worth another attempt.
TRANSIENT_MARKERS = (
    "could not read from remote",
    "connection refused",
    "timed out",
    "could not resolve",
    "unable to access",
    "does not appear to be a git repository",
    "early eof",
)


class GitFailed(RosterError):
    """A git step failed. Its message names the step only: git's output can echo the remote's URL or what
    it answered, so it stays in `output`, scrubbed of the credential before it is recorded."""

    def __init__(self, step: str, output: str):
        self.step, self.output = step, output
        super().__init__(f"git {step} failed")


def _git(args: list[str], cwd: Path, env: dict, stdin: bytes | None = None) -> str:
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        timeout=settings.ROSTER_EXECUTOR_TIMEOUT_SECONDS * 3,
        check=False,
    )
    output = (result.stdout + result.stderr).decode("utf-8", "replace").strip()
    if result.returncode != 0:
        raise GitFailed(args[0], output)
    return output


def _env(workdir: Path, credential: str | None) -> dict:
    askpass = workdir / "askpass.sh"
    askpass.write_text(ASKPASS)
    askpass.chmod(stat.S_IRWXU)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": str(askpass),
        "GIT_CONFIG_NOSYSTEM": "1",
        "LC_ALL": "C",
        "GIT_AUTHOR_NAME": "Roster",
        "GIT_AUTHOR_EMAIL": "roster@roster.invalid",
        "GIT_COMMITTER_NAME": "Roster",
        "GIT_COMMITTER_EMAIL": "roster@roster.invalid",
    }
    if credential:
        env["ROSTER_GIT_PASSWORD"] = credential
    return env


def push(proposal, credential: str | None) -> Outcome:
    dest, payload = proposal.destination, proposal.payload
    why = branch_allowed(payload["branch"], dest.branch_pattern, dest.protected_branches or [])
    if why:  # the destination changed since the proposal was accepted
        return Outcome(ok=False, transient=False, summary="branch not allowed", detail=why)
    with tempfile.TemporaryDirectory(prefix="roster-git-") as tmp:
        workdir = Path(tmp)
        env = _env(workdir, credential)
        repo = workdir / "repo"
        try:
            _git(["clone", "--quiet", "--no-checkout", "--", dest.url, str(repo)], workdir, env)
            _git(["checkout", "--quiet", "--detach", payload["base_commit"]], repo, env)
            if payload.get("patch") is not None:
                _git(["am", "--quiet", "--keep-cr"], repo, env, stdin=payload["patch"].encode())
            else:
                bundle = workdir / "proposal.bundle"
                bundle.write_bytes(base64.b64decode(payload["bundle_b64"]))
                _git(["fetch", "--quiet", str(bundle), "HEAD"], repo, env)
                _git(["merge-base", "--is-ancestor", payload["base_commit"], "FETCH_HEAD"], repo, env)
                _git(["checkout", "--quiet", "--detach", "FETCH_HEAD"], repo, env)
            head = _git(["rev-parse", "HEAD"], repo, env)
            output = _git(
                ["push", "--porcelain", "--", dest.url, f"HEAD:refs/heads/{payload['branch']}"], repo, env
            )
        except GitFailed as exc:
            text = scrub(exc.output, credential)
            transient = exc.step in ("clone", "push") and any(m in text.lower() for m in TRANSIENT_MARKERS)
            return Outcome(ok=False, transient=transient, summary=f"git {exc.step} failed", detail=text)
        except subprocess.TimeoutExpired:
            return Outcome(ok=False, transient=True, summary="git timed out")
    return Outcome(
        ok=True,
        transient=False,
        summary=f"pushed {head[:12]} to {payload['branch']}",
        detail=scrub(output, credential),
    )
