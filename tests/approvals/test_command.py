"""`manage.py approval list|decide`: the local approval path, beside the web queue."""

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_open, request_snapshot
from controlplane.audit.models import AuditRecord
from controlplane.vault.services import secret_set
from tests.approvals.helpers import approver, open_approval

pytestmark = pytest.mark.django_db


@pytest.fixture
def approval(live_run):
    return open_approval(live_run[0])


def test_list_shows_pending(approval, capsys):
    call_command("approval", "list", "--status", "pending")
    out = capsys.readouterr().out
    assert str(approval.pk) in out and "pending" in out and "alpha" in out
    assert "POST https://api.openai.com:443/v1/chat" in out
    assert f"run {approval.run_id}" in out and "grant    openai-chat" in out and "s left" in out


def test_list_shows_what_the_web_card_shows_masked_and_inert(live_run, capsys):
    """Headers masked (credentials, sentinels by name), body preview quoted on one line, box text inert."""
    secret = secret_set("model-key", "real-model-key-value-123", kind="generic")
    snapshot = request_snapshot(
        method="POST", url="https://api.example.com/v1/x",
        headers=[("Authorization", "Bearer sk-live-abc"), ("X-Note", f"see {secret.sentinel}"),
                 ("X-Trick", "a\u202eb\x1b[2J")],
        body_preview='{"a": 1}\nsecond line', body_sha256="b" * 64, body_size=123)
    approval = approval_open(run=live_run[0], grant_id=None, grant_slug="ask-me", snapshot=snapshot)
    call_command("approval", "list")
    out = capsys.readouterr().out
    assert f"approval {approval.pk}: pending" in out
    assert "header   Authorization: [masked]" in out and "sk-live-abc" not in out
    assert "header   X-Note: [masked]" in out and secret.sentinel not in out
    assert "real-model-key-value-123" not in out
    assert "\x1b" not in out and "\u202e" not in out and "a\\u202eb" in out
    assert 'body     (123 bytes, sha256 bbbbbbbbbbbbbbbb…) {"a": 1}\\nsecond line' in out
    assert "grant    ask-me" in out and "s left (expires" in out


@pytest.mark.parametrize(("choice", "status"), [("approve", "approved"), ("refuse", "refused")])
def test_decide(approval, choice, status, capsys):
    approver("ann")
    call_command("approval", "decide", str(approval.pk), choice, "--user", "ann")
    approval.refresh_from_db()
    assert approval.status == status and approval.channel == "cli" and approval.decided_by.username == "ann"
    assert f"{status} by ann" in capsys.readouterr().out
    assert AuditRecord.objects.filter(kind="approval", verdict=status).exists()


def test_decide_refuses_user_without_permission(approval):
    User.objects.create_user("mallory", password="pw-123456789")
    with pytest.raises(CommandError, match="may not decide"):
        call_command("approval", "decide", str(approval.pk), "approve", "--user", "mallory")
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_decide_errors_are_clear(approval):
    approver("ann")
    with pytest.raises(CommandError, match="no user"):
        call_command("approval", "decide", str(approval.pk), "approve", "--user", "ghost")
    with pytest.raises(CommandError, match="no approval"):
        call_command("approval", "decide", "00000000-0000-0000-0000-000000000000", "approve", "--user", "ann")
    with pytest.raises(CommandError, match="no approval"):
        call_command("approval", "decide", "garbage", "approve", "--user", "ann")
    call_command("approval", "decide", str(approval.pk), "refuse", "--user", "ann")
    with pytest.raises(CommandError, match="already refused"):
        call_command("approval", "decide", str(approval.pk), "approve", "--user", "ann")
