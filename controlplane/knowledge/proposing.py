"""A run's collected change becomes a `knowledge_change` proposal (the sink registered with
controlplane.knowledge.checkout), decided like any proposal: a person, or an admin's earned-trust rule for
the kind, never for an untrusted run and never when the participant scan holds it (controlplane.knowledge.
scan). The executor commits an allowed change on the trusted side, with trailers naming the run, the
worker, who was in the room and whether the run was untrusted (P4), and refuses a stale base whose
files moved since the run's checkout."""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.audit.services import audit_append
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Run
from controlplane.knowledge import repo as git
from controlplane.knowledge.models import Checkout, Commit
from controlplane.knowledge.validation import change_problems, decoded
from controlplane.proposals.executors import Outcome
from controlplane.proposals.models import Proposal
from controlplane.proposals.services.deciding import approve_by_rule
from controlplane.proposals.services.record import record


def change_propose(checkout: Checkout, change: dict) -> str:
    """Inside checkout_collect's transaction: the proposal, its `proposed` record, a rule's approval if one
    applies (approve_by_rule: never for an untrusted run, never past a tripwire's hold)."""
    run = Run.objects.select_related("worker").get(pk=checkout.run_id)
    payload_json = json.dumps(change, sort_keys=True, separators=(",", ":"))
    proposal = Proposal.objects.create(
        run=run, worker=run.worker, kind=Proposal.Kind.KNOWLEDGE_CHANGE, destination=None, payload=change,
        rationale="the run's changes to its knowledge checkout, collected when its box ended",
        payload_sha256=hashlib.sha256(payload_json.encode()).hexdigest(), taint=run.taint,
        untrusted=run.untrusted, participants=list(run.participants or []), seen=[],
        expires_at=timezone.now() + timedelta(seconds=settings.ROSTER_PROPOSAL_TTL_SECONDS),
        idempotency_key="rk_" + secrets.token_hex(24),
    )
    record(proposal, "proposed", kind=proposal.kind, destination=None, payload_sha256=proposal.payload_sha256,
           body_size=len(payload_json), taint=DataClass(run.taint).label, untrusted=run.untrusted,
           participants=proposal.participants, files=[f["path"] for f in change["files"]][:50],
           base_commit=change["base_commit"], expires_at=proposal.expires_at.isoformat())
    approve_by_rule(proposal)
    Checkout.objects.filter(pk=checkout.pk).update(proposal_id=proposal.pk)
    return f"proposed as {proposal.pk} ({len(change['files'])} files)"


def trailers(proposal: Proposal) -> str:
    people = ", ".join(str(p.get("id")) for p in proposal.participants or [] if isinstance(p, dict)) or "none"
    return (f"Roster-Run: {proposal.run_id}\nRoster-Worker: {proposal.worker.name}\n"
            f"Roster-Participants: {people}\nRoster-Untrusted: {'yes' if proposal.untrusted else 'no'}\n"
            f"Roster-Taint: {DataClass(proposal.taint).label}\nRoster-Proposal: {proposal.pk}\n")


def stale_problem(repo, base: str, head: str, paths: set[str]) -> str:
    """A change made on an older head applies only where nothing it touches moved since."""
    moved = sorted(git.changed_paths(repo, base, head) & paths)
    if moved:
        return (f"stale base: the head moved from {base[:12]} to {head[:12]} and changed "
                f"{', '.join(moved[:10])} since this run's checkout")
    return ""


def knowledge_change(proposal, credential: str | None) -> Outcome:
    """The executor (registered by the knowledge app): validate again, refuse a stale base, commit."""
    payload = proposal.payload or {}
    files = payload.get("files") or []
    problems = change_problems(files) or ([] if files else ["the change has no files"])
    if problems:
        return Outcome(ok=False, transient=False, summary="change refused", detail="; ".join(problems)[:1000])
    repo = git.repo_ensure(proposal.worker.name)
    base, head = str(payload.get("base_commit", "")), git.head(repo)
    paths = {f["path"] for f in files}
    try:
        stale = stale_problem(repo, base, head, paths)
    except git.GitFailed:
        stale = f"stale base: {base[:12]} is not a commit of this worker's repository"
    if stale:
        return Outcome(ok=False, transient=False, summary="stale base", detail=stale)
    message = (f"Knowledge change from run {proposal.run_id} of worker {proposal.worker.name}\n\n"
               + "".join(f"{f['action']} {f['path']}\n" for f in files[:50]) + "\n" + trailers(proposal))
    with transaction.atomic():
        try:
            sha = git.commit_files(repo, head, {f["path"]: decoded(f) for f in files}, message)
        except git.GitFailed as exc:  # nothing on the branch: try again later
            return Outcome(ok=False, transient=True, summary="commit failed", detail=str(exc))
        Commit.objects.create(worker=proposal.worker, sha=sha, parent=head, kind=Commit.Kind.CHANGE,
                              run_id=proposal.run_id, proposal_id=proposal.pk, paths=sorted(paths))
        audit_append("knowledge", {"action": "committed", "commit": sha, "parent": head, "base_commit": base,
                                   "run": proposal.run_id, "worker": proposal.worker.name,
                                   "proposal": str(proposal.pk), "paths": sorted(paths)[:50],
                                   "untrusted": bool(proposal.untrusted)},
                     run=proposal.run_id, worker=proposal.worker.name)
        try:  # last: a failed move rolls the records back, and the commit stays unreachable
            git.branch_move(repo, sha, head)
        except git.GitFailed as exc:
            transaction.set_rollback(True)
            return Outcome(ok=False, transient=True, summary="commit failed", detail=str(exc))
    return Outcome(ok=True, transient=False, summary=f"commit {sha[:12]}", detail=sha)
