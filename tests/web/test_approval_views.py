"""The approval queue page and the decide endpoint: who may see, who may decide, CSRF, escaping, masking."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.audit.models import AuditRecord
from tests.web.conftest import PASSWORD, open_approval

QUEUE = reverse("web:approvals")
LIST = reverse("web:approvals-list")


def _login(user, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    assert client.login(username=user.username, password=PASSWORD)
    return client


def _decide_url(approval) -> str:
    return reverse("web:approval-decide", args=[approval.pk])


def _csrf_post(client: Client, url: str, data: dict):
    """Post the way a browser does: fetch the page for its CSRF cookie, send the token back."""
    client.get(QUEUE)
    token = client.cookies["csrftoken"].value
    return client.post(url, {**data, "csrfmiddlewaretoken": token})


def test_anonymous_is_sent_to_login(approval):
    response = Client().get(QUEUE)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_user_without_a_role_cannot_see_the_queue(nobody, approval):
    assert _login(nobody).get(QUEUE).status_code == 403
    assert _login(nobody).get(LIST).status_code == 403


def test_approver_sees_every_fact_of_the_held_request(approver, approval):
    response = _login(approver).get(QUEUE)
    html = response.content.decode()
    assert response.status_code == 200
    assert f'id="approval-{approval.pk}"' in html
    assert "alpha" in html and f"run {approval.run_id}" in html
    assert "POST" in html and "https://api.example.com/v1/post?x=1" in html
    assert "example-post" in html
    assert "private" in html  # the run's taint
    assert 'data-expires="' in html
    assert html.count('value="approve"') == 1 and html.count('value="deny"') == 1


def test_body_with_markup_is_escaped_never_rendered(approver, approval):
    html = _login(approver).get(QUEUE).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "<b>bold</b>" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html


def test_pages_forbid_inline_script(approver, approval):
    response = _login(approver).get(QUEUE)
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp


def test_credential_headers_and_sentinels_are_masked(approver, run):
    from controlplane.vault.models import Secret

    sentinel = "sk-roster-SENTINEL0123456789abcdef"
    Secret.objects.create(name="openai", sentinel=sentinel, ciphertext=b"x")
    open_approval(
        run, url=f"https://api.example.com/v1/chat?key={sentinel}", body=f'{{"k": "{sentinel}"}}',
        headers=[["Authorization", "Bearer real-looking-value-123"], ["X-Custom", f"v={sentinel}"],
                 ["Cookie", "session=abcdef"], ["Accept", "text/plain"]],
    )
    html = _login(approver).get(QUEUE).content.decode()
    assert sentinel not in html
    assert "real-looking-value-123" not in html
    assert "session=abcdef" not in html
    assert "text/plain" in html  # harmless headers stay readable
    assert "sentinel of openai" in html  # the URL tells the approver which secret it points at


def test_the_approver_sees_which_headers_the_approval_binds(approver, run):
    open_approval(run, headers=[["Authorization", "Bearer x"], ["Content-Type", "application/json"],
                                ["Connection", "keep-alive"]])
    html = _login(approver).get(QUEUE).content.decode()
    row = r"<tr><td><code>([^<]+)</code></td><td><code>[^<]*</code></td><td class=\"bound\">([^<]+)</td>"
    rows = re.findall(row, html)
    assert rows == [("Authorization", "bound"), ("Content-Type", "bound"), ("Connection", "—")]
    assert "Approving covers exactly this method, this URL, this body" in html


def test_non_approver_sees_no_buttons_and_cannot_post(auditor, approval):
    client = _login(auditor, csrf=True)
    html = client.get(QUEUE).content.decode()
    assert 'value="approve"' not in html
    records_before = AuditRecord.objects.count()
    response = _csrf_post(client, _decide_url(approval), {"action": "approve"})
    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and approval.decided_by is None
    assert AuditRecord.objects.count() == records_before


def test_user_without_role_cannot_post_either(nobody, approval):
    response = _login(nobody).post(_decide_url(approval), {"action": "approve"})
    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


def test_anonymous_post_changes_nothing(approval):
    response = Client().post(_decide_url(approval), {"action": "approve"})
    assert response.status_code == 302
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


def test_post_without_csrf_token_is_refused(approver, approval):
    client = _login(approver, csrf=True)
    response = client.post(_decide_url(approval), {"action": "approve"})
    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


def test_approve_with_csrf_is_audited_with_who_and_how(approver, approval):
    client = _login(approver, csrf=True)
    response = _csrf_post(client, _decide_url(approval), {"action": "approve"})
    assert response.status_code == 302 and response["Location"] == QUEUE
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED
    assert approval.decided_by == approver and approval.channel == "web"
    record = AuditRecord.objects.filter(kind="approval", verdict="approved").get()
    assert '"by":"alice-approver"' in record.body and '"channel":"web"' in record.body
    html = client.get(QUEUE).content.decode()
    assert f'id="approval-{approval.pk}"' not in html  # gone from pending
    assert f'id="decided-{approval.pk}" data-status="approved"' in html


def test_deny_refuses(approver, approval):
    client = _login(approver, csrf=True)
    _csrf_post(client, _decide_url(approval), {"action": "deny"})
    approval.refresh_from_db()
    assert approval.status == Approval.Status.REFUSED and approval.decided_by == approver


def test_second_decision_changes_nothing(approver, approver2, approval):
    _csrf_post(_login(approver, csrf=True), _decide_url(approval), {"action": "deny"})
    response = _csrf_post(_login(approver2, csrf=True), _decide_url(approval), {"action": "approve"})
    assert response.status_code == 302
    approval.refresh_from_db()
    assert approval.status == Approval.Status.REFUSED and approval.decided_by.username == "alice-approver"


@pytest.mark.parametrize("action", ["", "APPROVE", "allow", "approve;deny"])
def test_unknown_action_is_a_clear_400(approver, approval, action):
    response = _login(approver).post(_decide_url(approval), {"action": action})
    assert response.status_code == 400
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


def test_decide_is_post_only(approver, approval):
    assert _login(approver).get(_decide_url(approval)).status_code == 405


def test_unknown_approval_is_404(approver, approval):
    url = reverse("web:approval-decide", args=["00000000-0000-0000-0000-000000000000"])
    assert _login(approver).post(url, {"action": "approve"}).status_code == 404


def test_expired_approval_is_not_listed_and_not_decidable(approver, approval):
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    client = _login(approver)
    assert f'id="approval-{approval.pk}"' not in client.get(QUEUE).content.decode()
    client.post(_decide_url(approval), {"action": "approve"})
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING  # closed to people; the sweeper expires it


def test_fragment_is_the_list_alone(approver, approval):
    response = _login(approver).get(LIST)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and f'id="approval-{approval.pk}"' in html
    assert "&lt;script&gt;" in html


def test_invisible_and_bidi_characters_cannot_disguise_what_is_approved(approver, run):
    """A box can put a right-to-left override or zero-width characters in the URL, headers or body so the
    approver reads something other than what is sent (`…/pay?to=\u202eexe.live` shows as `…evil.exe`).
    The queue shows every such character as a visible \\uXXXX escape instead."""
    tricks = "\u202e\u2066\u200b\u200f\ufeff\x1b"
    open_approval(run, url=f"https://api.example.com/pay?to={tricks}moc.live",
                  headers=[["x-note", f"a{tricks}b"]], body=f'{{"to": "{tricks}"}}')
    html = _login(approver).get(QUEUE).content.decode()
    assert not any(ch in html for ch in tricks)
    assert "pay?to=\\u202e\\u2066\\u200b\\u200f\\ufeff\\u001bmoc.live" in html
    assert "a\\u202e\\u2066\\u200b\\u200f\\ufeff\\u001bb" in html
