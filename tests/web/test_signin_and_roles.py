"""Signing in: repeated failures lock one (username, address) pair out for a while, the same way whether
or not the account exists, on the audit chain; a signed-in account with no role is told so and can sign
out, instead of meeting a bare 403."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from controlplane.audit.models import AuditRecord
from tests.web.conftest import PASSWORD

LOGIN = reverse("login")


def _try(client: Client, username: str, password: str, address: str = "10.9.8.7"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


@pytest.mark.login_throttle
@pytest.mark.django_db
@pytest.mark.parametrize("exists", [True, False], ids=["existing-user", "unknown-user"])
def test_repeated_failures_lock_out_the_pair_alike_for_known_and_unknown_users(approver, settings, exists):
    settings.AXES_FAILURE_LIMIT = 3
    name = approver.username if exists else "no-such-person"
    client = Client()
    answers = [_try(client, name, "wrong") for _ in range(3)]
    assert [a.status_code for a in answers[:2]] == [200, 200]  # the form again, with an error
    locked = _try(client, name, "wrong")
    assert locked.status_code == 429
    assert b"Too many failed sign-ins" in locked.content
    assert name.encode() not in locked.content  # nothing about the account
    # Even the right password is refused while the lock holds (for the real user).
    if exists:
        assert _try(client, name, PASSWORD).status_code == 429
    records = list(AuditRecord.objects.filter(kind="login"))
    assert len(records) == 1
    assert f'"username":"{name}"' in records[0].body and '"address":"10.9.8.7"' in records[0].body
    assert "wrong" not in records[0].body  # never the password tried
    assert records[0].verdict == "deny" and records[0].reason == "login_locked_out"


@pytest.mark.login_throttle
@pytest.mark.django_db
def test_a_lockout_is_per_address_so_nobody_elsewhere_can_lock_a_user_out(approver, settings):
    settings.AXES_FAILURE_LIMIT = 2
    attacker = Client()
    for _ in range(3):
        _try(attacker, approver.username, "wrong", address="10.0.0.66")
    assert _try(attacker, approver.username, PASSWORD, address="10.0.0.66").status_code == 429
    owner = Client()
    answer = _try(owner, approver.username, PASSWORD, address="10.0.0.5")
    assert answer.status_code == 302  # signed in from their own address


@pytest.mark.login_throttle
@pytest.mark.django_db
def test_a_success_before_the_limit_clears_the_count(approver, settings):
    settings.AXES_FAILURE_LIMIT = 3
    client = Client()
    _try(client, approver.username, "wrong")
    _try(client, approver.username, "wrong")
    assert _try(client, approver.username, PASSWORD).status_code == 302
    client.logout()
    _try(client, approver.username, "wrong")
    _try(client, approver.username, "wrong")
    assert _try(client, approver.username, PASSWORD).status_code == 302
    assert not AuditRecord.objects.filter(kind="login").exists()


@pytest.mark.django_db
def test_an_account_without_a_role_is_told_so_and_can_sign_out(nobody):
    client = Client()
    client.force_login(nobody)
    page = client.get(reverse("web:overview"))
    assert page.status_code == 403
    text = page.content.decode()
    assert 'id="no-role"' in text and "has no role yet" in text and nobody.username in text
    assert 'action="/accounts/logout/"' in text and 'id="sign-out-403"' in text
    assert client.post("/accounts/logout/").status_code in (200, 302)
    assert client.get(reverse("web:overview")).status_code == 302  # signed out: sent to the login page


@pytest.mark.django_db
def test_a_role_that_does_not_cover_the_page_is_named(approver):
    client = Client()
    client.force_login(approver)
    page = client.get(reverse("web:audit"))
    assert page.status_code == 403
    text = page.content.decode()
    assert 'id="not-allowed"' in text and "Approvers" in text and 'id="no-role"' not in text
