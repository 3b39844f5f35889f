"""The world store (docs/knowledge.md): a run's plain checkout (files, no `.git`), its change collected at
box end as a `knowledge_change` proposal, validated, decided (a person, or a rule, never for an untrusted
run), and committed by the trusted side with trailers; a stale base that conflicts is refused."""

from __future__ import annotations

import os

import pytest

from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_sequential
from controlplane.knowledge import repo as git
from controlplane.knowledge.checkout import checkout_collect
from controlplane.knowledge.models import Checkout, Commit
from controlplane.knowledge.services import knowledge_show
from controlplane.proposals.executors import EXECUTORS
from controlplane.proposals.models import Proposal, TrustRule
from controlplane.proposals.services import proposal_decide


def _approve(proposal_id, approver, capture):
    with capture(execute=True):
        proposal_decide(proposal_id, approver, True, "web")
    return Proposal.objects.get(pk=proposal_id)


def test_knowledge_registered_its_executor():
    assert EXECUTORS["knowledge_change"].__module__ == "controlplane.knowledge.proposing"


def test_a_checkout_is_plain_files_at_the_head(checkout_of, worker):
    run, where = checkout_of()
    checkout = Checkout.objects.get(run=run)
    assert checkout.base_commit == git.head(git.repo_path(worker.name)) and checkout.writable
    assert where.is_dir() and not (where / ".git").exists() and os.listdir(where) == []


def test_a_change_becomes_a_proposal_then_a_commit_with_the_trailers(
        checkout_of, worker, approver, django_capture_on_commit_callbacks):
    run, where = checkout_of(participants=[{"id": "@bo:example.org", "name": "Bo", "role": "owner"}])
    (where / "world").mkdir()
    (where / "world" / "hosts.md").write_text("The mirror is at mirror.example.net.\n")
    outcome = checkout_collect(run.pk, where)
    assert outcome.startswith("proposed as")
    proposal = Proposal.objects.get(kind="knowledge_change")
    assert proposal.status == "pending" and proposal.run_id == run.pk and proposal.destination_id is None
    assert proposal.payload["files"][0]["path"] == "world/hosts.md"
    proposal = _approve(proposal.pk, approver, django_capture_on_commit_callbacks)
    assert proposal.status == "executed", proposal.result
    commit = Commit.objects.get(kind="change")
    assert commit.run_id == run.pk and commit.paths == ["world/hosts.md"]
    message = git.log(git.repo_path(worker.name), limit=1)[0].message
    for trailer in (f"Roster-Run: {run.pk}", f"Roster-Worker: {worker.name}",
                    "Roster-Participants: @bo:example.org", "Roster-Untrusted: no", "Roster-Taint: "):
        assert trailer in message
    assert knowledge_show(worker.name, "world/hosts.md") == b"The mirror is at mirror.example.net.\n"
    assert AuditRecord.objects.filter(kind="knowledge", body__contains=commit.sha).exists()
    assert verify_sequential().ok
    assert checkout_collect(run.pk, where) == ""  # collected once


def test_no_change_no_proposal_and_a_read_only_checkout_is_never_collected(checkout_of):
    run, where = checkout_of()
    assert checkout_collect(run.pk, where) == "no change"
    ro_run, ro_where = checkout_of(writable=False)
    os.chmod(ro_where, 0o700)  # the box could not write here; this test writes as if it had
    (ro_where / "leak.md").write_text("Ana said ...")
    assert checkout_collect(ro_run.pk, ro_where) == ""
    assert not Proposal.objects.exists()


@pytest.mark.parametrize("make", ["symlink", "dotgit", "fifo", "binary", "big"])
def test_an_invalid_change_is_refused_before_it_is_proposed(checkout_of, settings, make):
    run, where = checkout_of()
    settings.ROSTER_KNOWLEDGE_FILE_MAX_BYTES = 1000
    if make == "symlink":
        os.symlink("/etc/passwd", where / "passwd")
    elif make == "dotgit":
        (where / ".git").mkdir()
        (where / ".git" / "config").write_text("[core]\n")
    elif make == "fifo":
        os.mkfifo(where / "pipe")
    elif make == "binary":
        (where / "blob.bin").write_bytes(b"\0\1\2")
    else:
        (where / "big.txt").write_text("x" * 1001)
    outcome = checkout_collect(run.pk, where)
    assert outcome.startswith("refused: "), outcome
    assert not Proposal.objects.exists()
    refused = AuditRecord.objects.get(kind="knowledge")
    assert '"refused"' in refused.body and refused.verdict == "deny"
    assert "root:" not in refused.body  # never a file's content, nor a link's target's


def test_a_stale_base_that_conflicts_is_refused_and_one_that_does_not_applies(
        checkout_of, approver, django_capture_on_commit_callbacks, worker):
    first, first_dir = checkout_of()
    second, second_dir = checkout_of()
    third, third_dir = checkout_of()
    for where, path, text in ((first_dir, "a.md", "one"), (second_dir, "a.md", "two"),
                              (third_dir, "b.md", "b")):
        (where / path).write_text(text)
    for run, where in ((first, first_dir), (second, second_dir), (third, third_dir)):
        checkout_collect(run.pk, where)
    ids = {p.run_id: p.pk for p in Proposal.objects.all()}
    assert _approve(ids[first.pk], approver, django_capture_on_commit_callbacks).status == "executed"
    stale = _approve(ids[second.pk], approver, django_capture_on_commit_callbacks)
    assert stale.status == "failed" and "stale base" in stale.result["detail"]
    assert "a.md" in stale.result["detail"]
    assert _approve(ids[third.pk], approver, django_capture_on_commit_callbacks).status == "executed"
    assert knowledge_show(worker.name, "a.md") == b"one" and knowledge_show(worker.name, "b.md") == b"b"


def test_a_deleted_file_is_a_deletion(checkout_of, approver, django_capture_on_commit_callbacks, worker):
    run, where = checkout_of()
    (where / "old.md").write_text("old")
    checkout_collect(run.pk, where)
    _approve(Proposal.objects.get().pk, approver, django_capture_on_commit_callbacks)
    again, again_dir = checkout_of()
    assert (again_dir / "old.md").read_text() == "old"
    (again_dir / "old.md").unlink()
    checkout_collect(again.pk, again_dir)
    proposal = Proposal.objects.get(run=again)
    assert proposal.payload["files"] == [{"path": "old.md", "action": "delete"}]
    assert _approve(proposal.pk, approver, django_capture_on_commit_callbacks).status == "executed"
    assert knowledge_show(worker.name, "old.md") is None


def test_a_rule_approves_a_trusted_runs_change_never_an_untrusted_ones(
        checkout_of, worker, django_capture_on_commit_callbacks):
    TrustRule.objects.create(name="kn", worker=worker, kind="knowledge_change", max_per_day=5)
    trusted, trusted_dir = checkout_of()
    untrusted, untrusted_dir = checkout_of(untrusted=True)
    (trusted_dir / "t.md").write_text("fine")
    (untrusted_dir / "u.md").write_text("from the web")
    with django_capture_on_commit_callbacks(execute=True):
        checkout_collect(trusted.pk, trusted_dir)
        checkout_collect(untrusted.pk, untrusted_dir)
    assert Proposal.objects.get(run=trusted).status == "executed"
    waiting = Proposal.objects.get(run=untrusted)
    assert waiting.status == "pending" and waiting.untrusted
    assert "Roster-Untrusted: no" in git.log(git.repo_path(worker.name), limit=1)[0].message


def test_no_box_can_submit_a_knowledge_change_itself(gw, token):
    status, body = gw.propose(token, {"kind": "knowledge_change", "payload": {"base_commit": "0" * 40,
                                                                              "files": []}})
    assert status == 422 and body["error"] == "invalid_proposal"
