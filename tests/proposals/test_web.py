"""Proposals in the approval queue: kind-specific previews, deciding with a reason, permissions."""

from __future__ import annotations

import pytest
from django.test import Client

from controlplane.proposals.models import Proposal

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def approver_client(approver):
    client = Client()
    client.force_login(approver)
    return client


def test_queue_shows_email_as_sent_and_webhook_body(gw, token, make_destination, approver_client):
    make_destination(
        "mail",
        kind="smtp",
        smtp_host="127.0.0.1",
        smtp_port=2525,
        starttls=False,
        from_address="bot@example.com",
        allowed_recipients=["@example.com"],
    )
    make_destination("hooks", kind="webhook", url="https://hooks.example.com/in?token=abc123", method="POST")
    gw.propose(
        token,
        {
            "kind": "email",
            "destination": "mail",
            "payload": {
                "to": ["ops@example.com"],
                "subject": "Quarterly <b>numbers</b>",
                "body": "Hello\u202eevil",
            },
        },
    )
    gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {"text": "<script>x</script>"}})
    page = approver_client.get("/approvals/").content.decode()
    assert "From: bot@example.com" in page and "To: ops@example.com" in page
    assert "Subject: Quarterly &lt;b&gt;numbers&lt;/b&gt;" in page
    assert "Hello\\u202eevil" in page  # a bidi override shown, not applied
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "<script>x</script>" not in page
    assert "abc123" not in page  # a credential-like query value of the destination URL is masked
    fragment = approver_client.get("/approvals/list/").content.decode()
    assert fragment.count('class="approval proposal') == 2


def test_approve_and_deny_with_reason(gw, token, make_destination, approver_client):
    make_destination("hooks", kind="webhook", url="http://127.0.0.1:9/in", method="POST")
    first = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {}})[1]["id"]
    response = approver_client.post(f"/proposals/{first}/decide/", {"action": "deny", "reason": "not now"})
    assert response.status_code == 302
    proposal = Proposal.objects.get(pk=first)
    assert (proposal.status, proposal.reason, proposal.channel) == ("refused", "not now", "web")
    page = approver_client.get("/approvals/").content.decode()
    assert f'id="settled-{first}" data-status="refused"' in page


def test_viewer_without_decide_permission_gets_403(gw, token, make_destination, django_user_model):
    make_destination("hooks", kind="webhook", url="http://127.0.0.1:9/in", method="POST")
    pid = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {}})[1]["id"]
    user = django_user_model.objects.create_user("viewer", password="pw-viewer-123")
    client = Client()
    client.force_login(user)
    assert client.post(f"/proposals/{pid}/decide/", {"action": "approve"}).status_code == 403
    assert Proposal.objects.get(pk=pid).status == "pending"


def test_bad_action_is_400(gw, token, make_destination, approver_client):
    make_destination("hooks", kind="webhook", url="http://127.0.0.1:9/in", method="POST")
    pid = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {}})[1]["id"]
    assert approver_client.post(f"/proposals/{pid}/decide/", {"action": "launch"}).status_code == 400
    assert Proposal.objects.get(pk=pid).status == "pending"
