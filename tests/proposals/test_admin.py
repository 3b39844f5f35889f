"""Destinations and trust rules in the admin: the shared validator's messages on the form, saves audited,
and no way to make a rule that approves identity edits."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from controlplane.audit.models import AuditRecord
from controlplane.fleet.models import Worker
from controlplane.proposals.models import Destination, TrustRule

pytestmark = pytest.mark.django_db

SMTP = {
    "name": "mail",
    "kind": "smtp",
    "description": "",
    "enabled": "on",
    "secret": "",
    "max_taint": "1",
    "cost_micro": "0",
    "daily_limit": "3",
    "url": "",
    "method": "",
    "headers": "",
    "secret_header": "",
    "secret_format": "",
    "smtp_host": "smtp.example.com",
    "smtp_port": "2525",
    "starttls": "on",
    "login": "",
    "from_address": "bot@example.com",
    "allowed_recipients": "ops@example.com\n@example.org",
    "branch_pattern": "",
    "protected_branches": "",
}


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    return client


def test_add_destination_validated_and_audited(admin_client):
    response = admin_client.post("/admin/proposals/destination/add/", SMTP)
    assert response.status_code == 302, response.content.decode()[:2000]
    dest = Destination.objects.get(name="mail")
    assert dest.allowed_recipients == ["ops@example.com", "@example.org"] and dest.smtp_port == 2525
    assert dest.daily_limit == 3 and dest.url == ""
    record = AuditRecord.objects.get(kind="grant_change")
    assert '"destination"' in record.body and '"root"' in record.body and '"admin"' in record.body


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"from_address": "not-an-address"}, "not an e-mail address"),
        ({"allowed_recipients": "everyone"}, "not an address or @domain"),
        ({"login": "roster"}, "go together"),
        ({"kind": "webhook", "url": "ftp://x.example/"}, "absolute http or https URL"),
        ({"kind": "webhook", "url": "https://x.example/", "headers": "{not json"}, "not valid JSON"),
    ],
)
def test_bad_destination_shows_the_error_and_saves_nothing(admin_client, changes, message):
    response = admin_client.post("/admin/proposals/destination/add/", {**SMTP, **changes})
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Destination.objects.exists() and not AuditRecord.objects.exists()


def test_trust_rule_form_never_offers_identity_edit(admin_client):
    Worker.objects.create(name="w1")
    admin_client.post("/admin/proposals/destination/add/", SMTP)
    page = admin_client.get("/admin/proposals/trustrule/add/").content.decode()
    assert 'value="email"' in page and 'value="identity_edit"' not in page
    response = admin_client.post(
        "/admin/proposals/trustrule/add/",
        {
            "name": "sneaky",
            "worker": Worker.objects.get().pk,
            "destination": Destination.objects.get().pk,
            "kind": "identity_edit",
            "max_per_day": "5",
            "enabled": "on",
        },
    )
    assert response.status_code == 200 and not TrustRule.objects.exists()


def test_trust_rule_added_audited_and_kind_must_fit_destination(admin_client):
    Worker.objects.create(name="w1")
    admin_client.post("/admin/proposals/destination/add/", SMTP)
    rule = {
        "name": "mail-ok",
        "worker": Worker.objects.get().pk,
        "destination": Destination.objects.get().pk,
        "kind": "webhook",
        "max_per_day": "5",
        "enabled": "on",
    }
    response = admin_client.post("/admin/proposals/trustrule/add/", rule)
    assert response.status_code == 200 and "takes email proposals only" in response.content.decode()
    response = admin_client.post("/admin/proposals/trustrule/add/", {**rule, "kind": "email"})
    assert response.status_code == 302
    assert TrustRule.objects.get().kind == "email"
    assert '"trust_rule"' in AuditRecord.objects.filter(kind="grant_change").last().body
