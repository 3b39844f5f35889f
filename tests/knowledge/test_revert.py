"""Repair (issue 26.4): `knowledge revert-run RUN` makes one new commit undoing a run's knowledge commits,
audited as `repair` naming the run; a later change of the same file is a conflict, refused; the audit
verifies after. Also `knowledge log` and `knowledge show`."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_sequential
from controlplane.knowledge import repo as git
from controlplane.knowledge.checkout import checkout_collect
from controlplane.knowledge.models import Commit
from controlplane.knowledge.services import knowledge_show
from controlplane.proposals.models import Proposal
from controlplane.proposals.services import proposal_decide


@pytest.fixture
def commit_change(checkout_of, approver, django_capture_on_commit_callbacks):
    def make(files: dict[str, str | None]):
        run, where = checkout_of()
        for path, text in files.items():
            if text is None:
                (where / path).unlink()
            else:
                (where / path).write_text(text)
        checkout_collect(run.pk, where)
        with django_capture_on_commit_callbacks(execute=True):
            proposal_decide(Proposal.objects.get(run=run).pk, approver, True, "web")
        assert Proposal.objects.get(run=run).status == "executed"
        return run

    return make


def _call(*args) -> str:
    out = StringIO()
    call_command("knowledge", *args, stdout=out)
    return out.getvalue()


def test_revert_run_undoes_its_commits_in_a_new_one(commit_change, worker, admin):
    keep = commit_change({"keep.md": "keep"})
    bad = commit_change({"bad.md": "wrong", "keep.md": "changed"})
    out = _call("revert-run", str(bad.pk), "--user", admin.username)
    assert f"run {bad.pk}'s knowledge commits reverted" in out
    assert knowledge_show(worker.name, "bad.md") is None
    assert knowledge_show(worker.name, "keep.md") == b"keep"
    revert = Commit.objects.get(kind="revert")
    assert Commit.objects.get(run=bad, kind="change").reverted_by == revert.sha
    assert Commit.objects.get(run=keep).reverted_by == ""
    repair = AuditRecord.objects.filter(kind="repair").get()
    assert '"revert_knowledge"' in repair.body and f'"repairs":{bad.pk}' in repair.body.replace(" ", "")
    assert f"Roster-Reverts-Run: {bad.pk}" in git.log(git.repo_path(worker.name), limit=1)[0].message
    assert verify_sequential().ok
    with pytest.raises(CommandError, match="no knowledge commit left"):
        _call("revert-run", str(bad.pk), "--user", admin.username)


def test_a_later_change_of_the_same_file_is_a_conflict(commit_change, worker, admin):
    bad = commit_change({"a.md": "wrong"})
    commit_change({"a.md": "fixed by hand"})
    with pytest.raises(CommandError, match="a later commit changed a.md"):
        _call("revert-run", str(bad.pk), "--user", admin.username)
    assert knowledge_show(worker.name, "a.md") == b"fixed by hand"
    assert not AuditRecord.objects.filter(kind="repair").exists()


def test_only_an_admin_reverts(commit_change, approver, admin):
    bad = commit_change({"a.md": "x"})
    with pytest.raises(CommandError, match="not an active admin"):
        _call("revert-run", str(bad.pk), "--user", approver.username)
    with pytest.raises(CommandError, match="no run"):
        _call("revert-run", "99999", "--user", admin.username)


def test_log_and_show(commit_change, worker):
    run = commit_change({"hosts.md": "mirror\n"})
    log = _call("log", worker.name)
    assert f"Roster-Run: {run.pk}" in log and "Knowledge repository of worker" in log
    assert _call("show", worker.name, "hosts.md") == "mirror\n"
    with pytest.raises(CommandError, match="no file"):
        _call("show", worker.name, "nothing.md")
    with pytest.raises(CommandError, match="no worker"):
        _call("log", "nobody")
