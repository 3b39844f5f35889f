"""The world store from inside a real box (issue 26's "done when"; docs/knowledge.md): a run that carried
conversation content gets its knowledge checkout read-only (EROFS: the mount, not a text filter); a run
without can write it, and its change becomes a commit with the trailers once a person allows it; no box
sees `.git`, the repository's history or another worker's repository."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from controlplane.conversations.models import Channel, Message
from controlplane.core.roles import APPROVERS, ensure_roles
from controlplane.dispatch.running import run_dispatch
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, worker_create
from controlplane.knowledge import repo as git
from controlplane.knowledge.models import Checkout, Commit
from controlplane.proposals.models import Proposal
from controlplane.proposals.services import proposal_decide

pytestmark = [pytest.mark.integration, pytest.mark.docker]

PROBE = r"""
import errno, json, os
out = {"listing": sorted(os.listdir("/knowledge")), "hosts": open("/knowledge/hosts.md").read()}
out["dotgit"] = [p for p, dirs, files in os.walk("/")
                 if ".git" in dirs and not p.startswith(("/proc", "/sys", "/usr", "/code"))]
out["mounts"] = [line.split()[3:5] for line in open("/proc/self/mountinfo") if "knowledge" in line]
try:
    with open("/knowledge/learned.md", "w") as handle:
        handle.write("The mirror moved to mirror.example.net.\n")
    with open("/knowledge/hosts.md", "a") as handle:
        handle.write("checked today\n")
    out["write"] = "ok"
except OSError as exc:
    out["write"] = errno.errorcode[exc.errno]
print("PROBE " + json.dumps(out))
"""


def _seed(worker_name: str, files: dict[str, bytes]) -> None:
    repo = git.repo_ensure(worker_name)
    head = git.head(repo)
    git.branch_move(repo, git.commit_files(repo, head, files, "seed\n"), head)


def _probe_run(worker, *, conversation: bool) -> tuple[Run, dict]:
    run, _ = run_create(worker, command=["python3", "-c", PROBE], timeout_seconds=60)
    if conversation:
        channel = Channel.objects.create(name=f"room-{run.pk}", kind="matrix", worker=worker,
                                         room_id=f"!r{run.pk}:example.org")
        Message.objects.create(channel=channel, direction="in", external_id=f"$m{run.pk}",
                               speaker_id="@ana:example.org", speaker_name="Ana", role="member",
                               sent_at=timezone.now(), text="Ana's private matter.", run=run)
    run_dispatch(run.pk)
    run.refresh_from_db()
    line = next((x for x in run.output.splitlines() if x.startswith("PROBE ")), None)
    assert run.status == Run.Status.SUCCEEDED and line, (run.status, run.status_reason, run.output[-2000:])
    return run, json.loads(line[len("PROBE "):])


def test_the_knowledge_mount_read_only_with_conversation_writable_without_and_committed(stack, settings):
    from controlplane.celery import app

    settings.CELERY_TASK_ALWAYS_EAGER = True
    app.conf.task_always_eager = True
    worker = worker_create("knows")
    worker_create("other")
    _seed("knows", {"hosts.md": b"mirror.example.org\n"})
    _seed("other", {"other-secret.md": b"not for knows\n"})

    chat_run, seen = _probe_run(worker, conversation=True)
    assert chat_run.carries_conversation
    assert seen["write"] == "EROFS", seen
    assert seen["listing"] == ["hosts.md"] and seen["hosts"] == "mirror.example.org\n"
    assert seen["dotgit"] == [] and len(seen["mounts"]) == 1 and seen["mounts"][0][1] == "/knowledge"
    assert str(settings.ROSTER_KNOWLEDGE_DIR) not in json.dumps(seen)  # only the checkout, never a repo
    assert not Checkout.objects.get(run=chat_run).writable
    assert not Proposal.objects.filter(run=chat_run).exists()

    run, seen = _probe_run(worker, conversation=False)
    assert seen["write"] == "ok" and seen["dotgit"] == [] and "other-secret.md" not in seen["listing"]
    proposal = Proposal.objects.get(run=run, kind="knowledge_change")
    assert {f["path"] for f in proposal.payload["files"]} == {"learned.md", "hosts.md"}
    assert proposal.status == "pending"
    ensure_roles()
    approver = User.objects.create_user("kim", password="pw-kim-123456")
    approver.groups.add(Group.objects.get(name=APPROVERS))
    proposal_decide(proposal.pk, User.objects.get(pk=approver.pk), True, "web")
    proposal.refresh_from_db()
    assert proposal.status == "executed", proposal.result
    commit = Commit.objects.get(run=run)
    message = git.log(git.repo_path("knows"), limit=1)[0].message
    assert commit.sha == git.head(git.repo_path("knows"))
    for trailer in (f"Roster-Run: {run.pk}", "Roster-Worker: knows", "Roster-Participants: none",
                    "Roster-Untrusted: no"):
        assert trailer in message
    assert git.blob(git.repo_path("knows"), commit.sha, "hosts.md") == b"mirror.example.org\nchecked today\n"
    other = git.repo_path("other")
    assert git.files_at(other, git.head(other)).keys() == {"other-secret.md"}
