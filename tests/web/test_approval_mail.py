"""Mail to approvers through a configured relay (a real aiosmtpd server): sent when a request is held,
to approvers with an address only, naming worker, method and host but never the box's path or body."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import Group, User

from controlplane.approvals import mail
from controlplane.core.roles import APPROVERS, AUDITORS, ensure_roles
from tests.proposals.servers import smtp_server
from tests.web.conftest import open_approval


@pytest.fixture
def people(db):
    ensure_roles()
    for name, group, email in [("ann", APPROVERS, "ann@example.test"), ("quiet", APPROVERS, ""),
                               ("carol", AUDITORS, "carol@example.test")]:
        User.objects.create_user(name, email=email).groups.add(Group.objects.get(name=group))


def test_held_request_mails_approvers_only(people, run, settings, django_capture_on_commit_callbacks):
    with smtp_server() as (port, box):
        settings.ROSTER_APPROVAL_MAIL_HOST, settings.ROSTER_APPROVAL_MAIL_PORT = "127.0.0.1", port
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            approval = open_approval(run, url="https://api.example.com/v1/secret-path?q=private",
                                     body="BODYTEXT")
        assert mail.send_now(approval.pk)
        # the live queue's broadcast and the mail (the audit chain's own transaction memo aside)
        opened = [c for c in callbacks if "TransactionMemo" not in c.__qualname__]
        assert len(opened) == 2
        deadline = time.monotonic() + 5
        while not box.messages and time.monotonic() < deadline:
            time.sleep(0.05)
    sender, recipients, content = box.messages[0]
    text = content.decode()
    assert recipients == ["ann@example.test"]
    assert "alpha waits for approval (POST api.example.com)" in text
    assert "/approvals/" in text
    assert "secret-path" not in text and "BODYTEXT" not in text and "private" not in text


def test_mail_off_or_relay_down_is_quiet(people, run, settings):
    approval = open_approval(run)
    settings.ROSTER_APPROVAL_MAIL_HOST = ""
    assert mail.send_now(approval.pk) is False
    settings.ROSTER_APPROVAL_MAIL_HOST, settings.ROSTER_APPROVAL_MAIL_PORT = "127.0.0.1", 9  # nothing there
    assert mail.send_now(approval.pk) is False
