"""Policy dry-run: decisions recorded by the real decision service, replayed against a draft grant set
(a directory of grant files, or one unsaved change); verdicts that flip each way are listed, grouped by
host and worker; the only write is one audited `dry_run` record."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from controlplane.audit.models import AuditRecord
from controlplane.egress.decide import decide
from controlplane.egress.request import EgressRequest
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status, worker_create
from controlplane.policy import dry_run
from controlplane.policy.engine import GrantRule
from controlplane.policy.models import Grant

pytestmark = pytest.mark.django_db
BOX = "10.89.0.2"  # the run's box on the locked network: its token is accepted from there only


def _ask(token: str, method: str, host: str, path: str) -> str:
    answer = decide(EgressRequest(token=token, client=BOX, method=method, scheme="https", host=host, port=443,
                                  path=path, headers=(), body_size=0, body_sha256="", body_preview="",
                                  mcp=()))
    return str(answer.decision.verdict)


@pytest.fixture
def recorded():
    """Three recorded decisions: an allow (docs), a deny (no grant for uploads) and an ask (POST)."""
    worker = worker_create("researcher")
    run, token = run_create(worker, command=["x"])
    run_set_status(run.pk, Run.Status.RUNNING)
    Run.objects.filter(pk=run.pk).update(box_address=BOX)
    Grant.objects.create(slug="docs", worker=worker, host="docs.example.com", methods=["GET"], mode="auto")
    Grant.objects.create(slug="api-post", worker=worker, host="api.example.com", methods=["POST"], mode="ask")
    verdicts = [_ask(token, "GET", "docs.example.com", "/guide"),
                _ask(token, "GET", "uploads.example.com", "/file"),
                _ask(token, "POST", "api.example.com", "/v1/send")]
    assert verdicts == ["allow", "deny", "ask"]
    return worker


def _files(tmp_path: Path, files: dict[str, str]) -> Path:
    tmp_path.mkdir(exist_ok=True)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


DRAFT = {  # docs dropped (allow -> deny), uploads granted (deny -> allow), api-post unchanged (ask)
    "uploads.toml": 'host = "uploads.example.com"\nworker = "researcher"\nmethods = ["GET"]\nmode = "auto"\n',
    "api-post.toml": 'host = "api.example.com"\nworker = "researcher"\nmethods = ["POST"]\nmode = "ask"\n',
}


def test_flips_each_way_grouped_by_host_and_worker(recorded, tmp_path):
    before = AuditRecord.objects.exclude(kind="dry_run").count()
    grants_before = list(Grant.objects.values_list("slug", "host", "mode").order_by("slug"))
    from controlplane.policy.grant_services import GRANT_FILES

    specs = GRANT_FILES.load_dir(_files(tmp_path / "draft", DRAFT)).specs
    report = dry_run.dry_run(dry_run.rules_from_specs(specs), days=7, actor="test", source="files")
    assert report.replayed == 3
    flips = {(c.host, c.worker, c.was, c.now) for c in report.changes}
    assert flips == {("docs.example.com", "researcher", "allow", "deny"),
                     ("uploads.example.com", "researcher", "deny", "allow")}
    assert list(report.grouped()) == [("docs.example.com", "researcher"),
                                      ("uploads.example.com", "researcher")]
    assert report.lines()[-1] == "dry-run: 3 decisions replayed, 2 would change"
    # read-only but for its own record
    assert AuditRecord.objects.exclude(kind="dry_run").count() == before
    assert list(Grant.objects.values_list("slug", "host", "mode").order_by("slug")) == grants_before
    record = AuditRecord.objects.get(kind="dry_run")
    assert '"would_change":2' in record.body and '"replayed":3' in record.body


def test_days_window_and_unsaved_admin_change(recorded):
    draft = GrantRule(slug="api-post", worker_id=recorded.pk, host="api.example.com", methods=("POST",),
                      mode="deny")
    report = dry_run.dry_run(dry_run.rules_with_draft(draft, "api-post"), days=1, actor="root",
                             source="admin")
    assert [(c.host, c.was, c.now) for c in report.changes] == [("api.example.com", "ask", "deny")]
    later = timezone.now() + timedelta(days=3)
    assert dry_run.dry_run(dry_run.rules_with_draft(draft, "api-post"), days=1, actor="root", source="admin",
                           now=later).replayed == 0
    with pytest.raises(ValueError):
        dry_run.dry_run(dry_run.rules_with_draft(draft, "api-post"), days=0, actor="x", source="x")


def test_cli(recorded, tmp_path, capsys):
    call_command("grants", "dry-run", str(_files(tmp_path / "d", DRAFT)), "--days", "3")
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == "dry-run: 3 decisions replayed, 2 would change"
    assert "docs.example.com / researcher: 1 would change" in out
    with pytest.raises(CommandError, match="nothing replayed"):
        call_command("grants", "dry-run", str(_files(tmp_path / "bad", {"x.toml": "host = \n"})))
    with pytest.raises(CommandError, match="--days"):
        call_command("grants", "dry-run", str(tmp_path / "d"), "--days", "0")


def test_admin_dry_runs_its_unsaved_change(recorded, client):
    from django.contrib.auth.models import User

    from tests.policy.test_trial import ADMIN_FORM

    client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    grant = Grant.objects.get(slug="docs")
    form = {**ADMIN_FORM, "worker": str(recorded.pk), "host": "docs.example.com", "methods": "GET",
            "paths": "", "mode": "deny", "try_only": "on", "try_dry_run_days": "7"}
    html = client.post(f"/admin/policy/grant/{grant.pk}/change/", form).content.decode()
    assert "dry-run: 3 decisions replayed, 1 would change" in html
    assert "docs.example.com / researcher: 1 would change" in html
    assert Grant.objects.get(slug="docs").mode == "auto"
    assert '"by":"root"' in AuditRecord.objects.get(kind="dry_run").body


def test_an_unchanged_conditioned_grant_set_reports_no_change_and_says_why(recorded):
    """Issue 27.3: replays carry no headers, so a grant with header conditions would flip every request it
    allowed; the dry-run counts those replays and says so instead."""
    worker = recorded
    Grant.objects.create(slug="json-only", worker=worker, host="json.example.com", methods=["POST"],
                         mode="auto",
                         header_conditions=[{"name": "content-type", "equals": "application/json"}])
    run, token = run_create(worker, command=["x"])
    run_set_status(run.pk, Run.Status.RUNNING)
    Run.objects.filter(pk=run.pk).update(box_address=BOX)
    answer = decide(EgressRequest(token=token, client=BOX, method="POST", scheme="https",
                                  host="json.example.com", port=443, path="/in",
                                  headers=(("content-type", "application/json"),), body_size=2,
                                  body_sha256="", body_preview="", mcp=()))
    assert str(answer.decision.verdict) == "allow"
    stored = Grant.objects.get(slug="json-only")
    report = dry_run.dry_run(dry_run.rules_with_draft(GrantRule.from_model(stored), "json-only"), days=1,
                             actor="t", source="unchanged")
    assert report.changes == []
    assert report.header_conditioned == 1 and report.header_conditioned_differ == 1
    text = "\n".join(report.lines())
    assert "1 replayed decisions are aimed at a grant with header conditions" in text
    assert "0 would change" in text
    record = AuditRecord.objects.filter(kind="dry_run").last()
    assert '"header_conditioned":1' in record.body
