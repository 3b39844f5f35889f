"""Issue 27.8 on the queue page and the CLI: the "also allow identical requests for N minutes" choice,
its confirmation in words, the open time boxes listed with a Revoke button (approvers only), and the
command line's `approval decide --window` and `approval revoke-window`."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from controlplane.approvals.models import Approval
from controlplane.audit.models import AuditRecord
from tests.web.test_approval_views import QUEUE, _csrf_post, _decide_url, _login

pytestmark = pytest.mark.django_db


def _revoke_url(approval) -> str:
    return reverse("web:approval-window-revoke", args=[approval.pk])


def _said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_the_card_offers_the_time_box_choices(approver, approval):
    html = _login(approver).get(QUEUE).content.decode()
    options = re.findall(r'<option value="(\d+)"', html)
    assert options == ["0", "10", "30", "60"]
    assert "also allow identical requests of alpha" in html


def test_no_choice_when_turned_off(approver, approval, settings):
    settings.ROSTER_APPROVAL_WINDOW_MAX_MINUTES = 0
    assert 'name="window_minutes"' not in _login(approver).get(QUEUE).content.decode()


def test_approving_with_a_time_box_confirms_it_in_words_and_lists_it(approver, approval):
    client = _login(approver)
    response = _csrf_post(client, _decide_url(approval), {"action": "approve", "window_minutes": "10"})
    said = _said(response)[0]
    assert said.startswith("Approved POST api.example.com/v1/post for alpha (run ")
    assert "identical requests of alpha pass without asking until" in said and "UTC" in said
    approval.refresh_from_db()
    assert approval.window_until is not None
    html = client.get(QUEUE).content.decode()
    assert f'id="timebox-{approval.pk}"' in html and "Time-boxed approvals now open (1)" in html
    assert f'id="timebox-{approval.pk}"' in client.get(QUEUE, {"worker": "alpha"}).content.decode()
    assert f'id="timebox-{approval.pk}"' not in client.get(QUEUE, {"worker": "beta"}).content.decode()
    response = _csrf_post(client, _revoke_url(approval), {})
    assert _said(response)[0] == ("Revoked: identical POST api.example.com/v1/post requests of alpha ask for "
                                  "approval again from now on.")
    approval.refresh_from_db()
    assert approval.window_revoked_at is not None and approval.window_revoked_by == approver
    assert f'id="timebox-{approval.pk}"' not in client.get(QUEUE).content.decode()
    response = _csrf_post(client, _revoke_url(approval), {})
    assert "already ended or been revoked" in _said(response)[0]


@pytest.mark.parametrize("minutes", ["61", "abc", "-1"])
def test_a_bad_time_box_changes_nothing(approver, approval, minutes):
    response = _csrf_post(_login(approver), _decide_url(approval), {"action": "approve",
                                                                    "window_minutes": minutes})
    assert _said(response)[0].startswith("Nothing changed: ")
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and approval.window_until is None


def test_a_deny_ignores_the_time_box_field(approver, approval):
    _csrf_post(_login(approver), _decide_url(approval), {"action": "deny", "window_minutes": "10"})
    approval.refresh_from_db()
    assert approval.status == Approval.Status.REFUSED and approval.window_until is None


def test_revoke_is_for_approvers_only(approver, auditor, approval):
    from controlplane.approvals.services import approval_decide

    approval_decide(approval.pk, approver, True, "web", window_minutes=10)
    client = _login(auditor)
    html = client.get(QUEUE).content.decode()
    assert f'id="timebox-{approval.pk}"' in html and 'class="revoke-window"' not in html
    assert _csrf_post(client, _revoke_url(approval), {}).status_code == 403
    approval.refresh_from_db()
    assert approval.window_revoked_at is None


def test_the_command_line_decides_with_a_window_and_revokes(approver, approval):
    out = io.StringIO()
    call_command("approval", "decide", str(approval.pk), "approve", "--user", approver.username,
                 "--window", "30", stdout=out)
    assert "identical requests pass until" in out.getvalue()
    out = io.StringIO()
    call_command("approval", "show", str(approval.pk), stdout=out)
    assert "identical requests of alpha pass until" in out.getvalue()
    call_command("approval", "revoke-window", str(approval.pk), "--user", approver.username,
                 stdout=io.StringIO())
    record = json.loads(AuditRecord.objects.filter(kind="approval").order_by("-seq").first().body)["data"]
    assert record["event"] == "window_revoked"
    with pytest.raises(CommandError, match="no open time box"):
        call_command("approval", "revoke-window", str(approval.pk), "--user", approver.username)


def test_the_command_line_refuses_a_window_too_long(approver, approval):
    with pytest.raises(CommandError, match="1 to 60 minutes"):
        call_command("approval", "decide", str(approval.pk), "approve", "--user", approver.username,
                     "--window", "90")
