"""Issue 27.5: what the pages and the demo say is true. The runs list's "Untrusted input" column warns
for an untrusted run (no green check), a credential_use row names where the secret went, the approval
confirmation keeps the port, the vault doc calls a stray sentinel a tripwire, the demo's proposal lines
read one per proposal, and its "waits until" names the box's hold and the approval's own deadline."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from controlplane.audit.services import audit_append
from controlplane.demo.report import approval_wait, report_lines, run_facts
from controlplane.fleet.models import Run
from tests.web.conftest import open_approval
from tests.web.test_approval_views import QUEUE, _csrf_post, _decide_url, _login

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_runs_list_warns_for_an_untrusted_run_instead_of_a_green_check(run):
    Run.objects.filter(pk=run.pk).update(untrusted=True)
    root = User.objects.create_superuser("root", password="pw-123456789")
    client = Client()
    client.force_login(root)
    html = client.get("/admin/fleet/run/").content.decode()
    row = html[html.index(f'value="{run.pk}"'):]
    row = row[:row.index("</tr>")]
    assert "icon-yes" not in row and "⚠ untrusted" in row
    Run.objects.filter(pk=run.pk).update(untrusted=False)
    html = client.get("/admin/fleet/run/").content.decode()
    assert "⚠ untrusted" not in html and ">trusted<" in html


def _timeline(approver, run) -> str:
    return _login(approver).get(reverse("web:run", args=[run.pk])).content.decode()


def test_credential_use_row_names_the_url_not_empty_parts(approver, run):
    audit_append("credential_use", {"decision_id": "dc_1", "secret": "model-key", "grant": "model",
                                    "host": "127.0.0.1", "url": "http://127.0.0.1:18091/v1/chat/completions",
                                    "inject": True, "replace": False}, run=run)
    # A record written before the URL was kept: its host alone, never "://127.0.0.1:".
    audit_append("credential_use", {"decision_id": "dc_2", "secret": "model-key", "grant": "model",
                                    "host": "127.0.0.1", "inject": False, "replace": True}, run=run)
    html = _timeline(approver, run)
    assert "://127.0.0.1:<" not in html and "://127.0.0.1: " not in html and "://127.0.0.1:\n" not in html
    assert "secret model-key injected for http://127.0.0.1:18091/v1/chat/completions" in html
    assert "secret model-key swapped for its sentinel for 127.0.0.1" in html


def test_approval_confirmation_keeps_the_port(approver, run):
    approval = open_approval(run, url="http://127.0.0.1:18093/status", body="")
    client = _login(approver, csrf=True)
    _csrf_post(client, _decide_url(approval), {"action": "approve"})
    html = client.get(QUEUE).content.decode()
    assert "Approved POST 127.0.0.1:18093/status for alpha" in html


def test_approval_confirmation_drops_userinfo(approver, run):
    approval = open_approval(run, url="http://user:pw@api.example.com:8443/x", body="")
    client = _login(approver, csrf=True)
    _csrf_post(client, _decide_url(approval), {"action": "deny"})
    html = client.get(QUEUE).content.decode()
    assert "Denied POST api.example.com:8443/x for alpha" in html  # the confirmation: no user:pw@


def test_vault_doc_calls_a_stray_sentinel_a_tripwire():
    text = " ".join((DOCS / "vault.md").read_text().split())
    assert "is a deny (`no_grant`) audited as a tripwire" not in text
    assert "a sentinel seen anywhere else is a deny `tripwire`" in text


def test_demo_proposal_lines_are_one_per_proposal(run):
    for proposal, event, verdict in (("p-one-1234", "proposed", "ask"), ("p-two-5678", "proposed", "ask"),
                                     ("p-one-1234", "decided", "approved"),
                                     ("p-one-1234", "executed", "executed"),
                                     ("p-two-5678", "decided", "refused")):
        audit_append("proposal", {"proposal": proposal, "event": event}, run=run, verdict=verdict)
    lines = report_lines(run, run_facts(run, "model"), "http://x/runs/1/")
    assert "  proposal p-one-12: proposed → decided: approved → executed" in lines
    assert "  proposal p-two-56: proposed → decided: refused" in lines
    assert not any("ask" in line or "executed executed" in line for line in lines if "proposal" in line)


def test_demo_wait_names_the_hold_and_the_approvals_own_deadline(run, settings):
    settings.ROSTER_APPROVAL_HOLD_SECONDS = 60
    settings.ROSTER_APPROVAL_GRACE_SECONDS = 120
    approval = open_approval(run)
    approval.expires_at = timezone.now() + timedelta(days=1)
    text = approval_wait(approval)
    box_until = approval.created_at + timedelta(seconds=60)
    assert f"the box waits until {box_until:%H:%M:%S} UTC" in text
    assert f"until {approval.expires_at:%Y-%m-%d %H:%M:%S} UTC" in text  # another day: the date is shown
    assert "within 2 min" in text
