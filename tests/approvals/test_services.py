from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from controlplane.approvals import broadcast
from controlplane.approvals.models import Approval
from controlplane.approvals.services import (
    ApprovalClosed,
    approval_abandon,
    approval_consume,
    approval_consume_grace,
    approval_decide,
    approval_expire_due,
    request_digest,
    request_snapshot,
)
from controlplane.audit.models import AuditRecord
from controlplane.vault.redact import MASK
from tests.approvals.helpers import approver, open_approval

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(live_run):
    return live_run[0]


@pytest.fixture
def pushed(monkeypatch):
    calls = []
    monkeypatch.setattr(broadcast, "approval_changed", lambda pk, status: calls.append((pk, status)))
    return calls


def test_digest_covers_method_url_and_body():
    base = request_digest("POST", "https://h:443/p", "a" * 64)
    assert base == request_digest("post", "https://h:443/p", "A" * 64)
    assert len({base, request_digest("GET", "https://h:443/p", "a" * 64),
                request_digest("POST", "https://h:443/q", "a" * 64),
                request_digest("POST", "https://h:443/p", "b" * 64)}) == 4
    # Field boundaries cannot be shifted to forge a collision.
    assert request_digest("POST", "https://h/p\nx", "") != request_digest("POST", "https://h/p", "x")


def test_snapshot_masks_credentials_and_sentinels():
    snapshot = request_snapshot(
        method="POST", url="https://h:443/p",
        headers=[["Authorization", "Bearer abc"], ["Cookie", "s=1"], ["X-Api-Key", "k"],
                 ["x-custom", "has SENTINEL-1 inside"], ["accept", "text/plain"]],
        body_preview='{"key": "SENTINEL-1"}', body_sha256="a" * 64, body_size=20,
        sentinels=frozenset({"SENTINEL-1"}))
    assert [v for _, v in snapshot["headers"]] == [MASK, MASK, MASK, MASK, "text/plain"]
    assert "SENTINEL-1" not in snapshot["body_preview"]
    assert snapshot["body_sha256"] == "a" * 64 and snapshot["url"] == "https://h:443/p"


def test_open_sets_expiry_and_digest(run, settings):
    approval = open_approval(run)
    assert approval.status == "pending"
    ttl = (approval.expires_at - approval.created_at).total_seconds()
    assert abs(ttl - settings.ROSTER_APPROVAL_TTL_SECONDS) < 2
    assert approval.request_digest == request_digest("POST", approval.request["url"], "a" * 64)


def test_decide_needs_the_permission(run, pushed):
    approval = open_approval(run)
    nobody = User.objects.create_user("mallory", password="pw-123456789")
    staff = User.objects.create_user("sam", password="pw-123456789", is_staff=True)
    before = AuditRecord.objects.count()
    for user in (nobody, staff, None):
        with pytest.raises(PermissionDenied):
            approval_decide(approval.pk, user, True, "web")
    inactive = approver("ina")
    inactive.is_active = False
    inactive.save()
    with pytest.raises(PermissionDenied):
        approval_decide(approval.pk, inactive, True, "web")
    approval.refresh_from_db()
    assert approval.status == "pending" and approval.decided_by is None
    assert AuditRecord.objects.count() == before and pushed == []


def test_decide_records_who_when_and_channel(run, pushed, django_capture_on_commit_callbacks):
    approval = open_approval(run)
    user = approver()
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(approval.pk, user, True, "cli")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.channel) == ("approved", user, "cli")
    assert approval.decided_at is not None and approval.grace_until is None
    record = AuditRecord.objects.filter(kind="approval").order_by("seq").last()
    assert record.verdict == "approved" and '"ann"' in record.body and '"cli"' in record.body
    assert pushed == [(str(approval.pk), "approved")]


def test_only_pending_can_be_decided(run):
    approval = open_approval(run)
    user = approver()
    approval_decide(approval.pk, user, False, "web")
    with pytest.raises(ApprovalClosed):
        approval_decide(approval.pk, user, True, "web")
    approval.refresh_from_db()
    assert approval.status == "refused"


def test_expired_approval_cannot_be_approved(run):
    approval = open_approval(run)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(ApprovalClosed):
        approval_decide(approval.pk, approver(), True, "web")


def test_unknown_channel_is_refused(run):
    approval = open_approval(run)
    with pytest.raises(ValueError):
        approval_decide(approval.pk, approver(), True, "carrier-pigeon")


def test_expire_due_expires_only_overdue_pending(run, pushed, django_capture_on_commit_callbacks):
    overdue, fresh, decided = open_approval(run), open_approval(run), open_approval(run)
    approval_decide(decided.pk, approver(), True, "web")
    past = timezone.now() - timedelta(seconds=1)
    Approval.objects.filter(pk__in=[overdue.pk, decided.pk]).update(expires_at=past)
    with django_capture_on_commit_callbacks(execute=True):
        assert approval_expire_due() == 1
    statuses = {a.pk: a.status for a in Approval.objects.all()}
    assert statuses == {overdue.pk: "expired", fresh.pk: "pending", decided.pk: "approved"}
    assert (str(overdue.pk), "expired") in pushed
    assert approval_expire_due() == 0


def test_consume_is_single_use_and_bound_to_the_run(run, other_worker):
    from controlplane.fleet.services import run_create

    approval = open_approval(run)
    other_run, _ = run_create(other_worker)
    assert not approval_consume(approval.pk, run.pk)  # pending: nothing to consume
    approval_decide(approval.pk, approver(), True, "web")
    assert not approval_consume(approval.pk, other_run.pk)
    assert approval_consume(approval.pk, run.pk)
    assert not approval_consume(approval.pk, run.pk)
    assert Approval.objects.get(pk=approval.pk).status == "used"


def test_grace_needs_abandonment_and_matches_digest_and_run(run):
    approval = open_approval(run)
    approval_decide(approval.pk, approver(), True, "web")
    # Not abandoned: no grace.
    assert approval_consume_grace(run.pk, approval.request_digest, "openai-chat") is None
    approval_abandon(approval.pk)  # abandoned after approval: grace starts now
    approval.refresh_from_db()
    assert approval.grace_until is not None
    assert approval_consume_grace(run.pk, "0" * 64, "openai-chat") is None
    assert approval_consume_grace(run.pk + 1000, approval.request_digest, "openai-chat") is None
    assert approval_consume_grace(run.pk, approval.request_digest, "other-grant") is None
    assert approval_consume_grace(run.pk, approval.request_digest, "openai-chat").pk == approval.pk
    assert approval_consume_grace(run.pk, approval.request_digest, "openai-chat") is None


def test_abandon_keeps_the_approval_decidable(run, settings):
    approval = open_approval(run)
    approval_abandon(approval.pk)
    approval_decide(approval.pk, approver(), True, "web")
    approval.refresh_from_db()
    grace = (approval.grace_until - approval.decided_at).total_seconds()
    assert approval.status == "approved" and grace == settings.ROSTER_APPROVAL_GRACE_SECONDS
    assert AuditRecord.objects.filter(kind="approval", body__contains='"abandoned"').exists()


BASE_HEADERS = [("Authorization", "Bearer sk-roster-x"), ("Content-Type", "application/json"),
                ("Accept", "*/*"), ("Connection", "keep-alive"), ("Content-Length", "2")]
BINDING = [
    ("another Authorization", [("Authorization", "Bearer other")], False),
    ("another Content-Type", [("Content-Type", "text/plain")], False),
    ("an added method override", [("X-HTTP-Method-Override", "DELETE")], False),
    ("a header dropped", [("Accept", None)], False),
    ("a second value of a header", [("Accept", "*/*"), ("Accept", "text/html")], False),
    ("header name case", [("authorization", "Bearer sk-roster-x"), ("Authorization", None)], True),
    ("transport: Connection", [("Connection", "close")], True),
    ("transport: Content-Length", [("Content-Length", "3")], True),
    ("transport: Proxy-Authorization", [("Proxy-Authorization", "Basic eA==")], True),
    ("header order across names", "reorder", True),
]


def _changed(change) -> list[tuple[str, str]]:
    if change == "reorder":
        return list(reversed(BASE_HEADERS))
    headers = list(BASE_HEADERS)
    for name, value in change:
        if value is None:
            headers = [(n, v) for n, v in headers if n != name]
        elif any(n == name for n, _ in headers) and name != "Accept":
            headers = [(n, value if n == name else v) for n, v in headers]
        else:
            headers.append((name, value))
    return headers


@pytest.mark.parametrize("name,change,same", BINDING, ids=[b[0] for b in BINDING])
def test_an_approval_binds_every_end_to_end_header(name, change, same):
    base = request_digest("POST", "https://h:443/p", "a" * 64, BASE_HEADERS)
    assert (request_digest("POST", "https://h:443/p", "a" * 64, _changed(change)) == base) is same


def test_the_snapshot_names_the_bound_headers():
    snapshot = request_snapshot(method="POST", url="https://h:443/p", headers=BASE_HEADERS, body_preview="{}",
                                body_sha256="a" * 64, body_size=2)
    assert snapshot["bound_headers"] == ["accept", "authorization", "content-type"]
