"""The run timeline and knowledge (issue 26.6, 26.4; docs/knowledge.md): it shows the checkout commit a run
was given and its mode, what it wrote back (the proposal, the commit), and for admins only a revert of the
run's knowledge commits, which names the run on the record."""

from __future__ import annotations

import pytest

from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_sequential
from controlplane.fleet.services import run_create
from controlplane.knowledge.checkout import checkout_collect, checkout_open, checkout_write
from controlplane.knowledge.models import Commit
from controlplane.proposals.models import Proposal
from controlplane.proposals.services import proposal_decide
from tests.proposals.conftest import _eager  # noqa: F401 - fixture: executors run at once
from tests.web.test_run_repair import conversation_run, no_dispatch  # noqa: F401 - fixtures


@pytest.fixture
def committed_run(worker, approver, tmp_path, django_capture_on_commit_callbacks):
    run, _ = run_create(worker, command=["true"])
    checkout_open(run, writable=True)
    checkout_write(run.pk, tmp_path / "k")
    (tmp_path / "k" / "mirror.md").write_text("mirror.example.net\n")
    checkout_collect(run.pk, tmp_path / "k")
    with django_capture_on_commit_callbacks(execute=True):
        proposal_decide(Proposal.objects.get(run=run).pk, approver, True, "web")
    return run


def test_a_conversation_runs_checkout_is_shown_read_only(client, admin_user, conversation_run):  # noqa: F811
    client.force_login(admin_user)
    page = client.get(f"/runs/{conversation_run.pk}/").content.decode()
    assert "read-only (it carried conversation content)" in page
    assert "knowledge checkout" in page and "(read-only)" in page  # the run_input record's summary
    assert 'id="revert-knowledge"' not in page


def test_the_timeline_shows_what_was_written_back_and_an_admin_reverts_it(client, admin_user, committed_run):
    commit = Commit.objects.get(run=committed_run)
    proposal = Proposal.objects.get(run=committed_run)
    client.force_login(admin_user)
    page = client.get(f"/runs/{committed_run.pk}/").content.decode()
    assert f"#proposal-{proposal.pk}" in page and commit.sha[:12] in page and "writable" in page
    assert 'id="revert-knowledge"' in page and "knowledge commit " in page
    response = client.post(f"/runs/{committed_run.pk}/repair/revert-knowledge/", {"reason": "wrong host"})
    assert response.status_code == 302
    commit.refresh_from_db()
    assert commit.reverted_by
    page = client.get(f"/runs/{committed_run.pk}/").content.decode()
    assert "reverted by" in page and 'id="revert-knowledge"' not in page
    assert f"repair of run {committed_run.pk}: knowledge commits" in page
    again = client.post(f"/runs/{committed_run.pk}/repair/revert-knowledge/")
    assert again.status_code == 409 and "no knowledge commit left" in again.content.decode()
    assert AuditRecord.objects.filter(kind="repair").count() == 1
    assert verify_sequential().ok


def test_only_an_admin_sees_and_uses_the_revert(client, approver, committed_run):
    client.force_login(approver)
    page = client.get(f"/runs/{committed_run.pk}/")
    assert page.status_code == 200 and 'id="revert-knowledge"' not in page.content.decode()
    assert client.post(f"/runs/{committed_run.pk}/repair/revert-knowledge/").status_code == 403
    assert Commit.objects.get(run=committed_run).reverted_by == ""
