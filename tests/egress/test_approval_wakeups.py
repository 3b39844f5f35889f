"""The approval wait is woken by the decision's announcement (controlplane.egress.approval_wait), served for
real by the decision API's own process on a real Redis. The database reads it falls back on are slowed
down here (POLL_SECONDS), so an answer that comes quickly came from the announcement, or from the
approval's own expiry; the database alone decides what the answer is."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from controlplane.approvals.broadcast import approval_changed
from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_decide
from controlplane.audit.models import AuditRecord
from controlplane.fleet.models import PolicyVersion
from tests.approvals.helpers import approver
from tests.egress.fixtures import decide_body
from tests.support import procs

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

POLL_SECONDS = 30  # longer than any wait below: an answer inside QUICK_SECONDS never came from a poll
WAIT_SECONDS = 20
QUICK_SECONDS = 10  # generous for a loaded machine; the poll would take POLL_SECONDS or WAIT_SECONDS
IN_FLIGHT_SECONDS = 1.0  # let the wait reach its pause before the decision


def _env(redis_url: str, **extra: str) -> dict[str, str]:
    return procs.control_plane_env(connection.settings_dict["NAME"], redis_url, {
        "ROSTER_GATEWAY_TOKEN_SHA256": settings.ROSTER_GATEWAY_TOKEN_SHA256,
        "ROSTER_VAULT_KEY_FILE": str(settings.ROSTER_VAULT_KEY_FILE),
        "ROSTER_APPROVAL_POLL_SECONDS": str(POLL_SECONDS),
        "ROSTER_APPROVAL_RECHECK_SECONDS": str(POLL_SECONDS),
        **extra,
    })


@pytest.fixture
def announced(settings, redis_url):
    """Announcements made in this process go through the Redis the server listens on."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": [redis_url]}}}


@pytest.fixture
def server(tmp_path, redis_url, announced):
    # One server per test: its policy cache must not outlive the test's database rows.
    PolicyVersion.objects.get_or_create(pk=1)
    with procs.decision_api_server(_env(redis_url), tmp_path) as url:
        procs.wait_for_http(f"{url}/api/gateway/health", timeout=30)
        yield url


def _ask(url, gateway_auth, token) -> str:
    answer = httpx.post(f"{url}/api/gateway/decide", json=decide_body(token, host="ask.example.com"),
                        headers=gateway_auth, timeout=10).json()
    assert answer["verdict"] == "ask", answer
    return answer["approval_id"]


def _wait(url, gateway_auth, approval_id, timeout=WAIT_SECONDS) -> tuple[dict, float]:
    started = time.monotonic()
    answer = httpx.post(f"{url}/api/gateway/approvals/{approval_id}/wait", json={"timeout_seconds": timeout},
                        headers=gateway_auth, timeout=timeout + 10).json()
    return answer, time.monotonic() - started


def _decided_while_waiting(url, gateway_auth, token, decide) -> tuple[dict, float]:
    approval_id = _ask(url, gateway_auth, token)
    with ThreadPoolExecutor(1) as bg:
        waiting = bg.submit(_wait, url, gateway_auth, approval_id)
        time.sleep(IN_FLIGHT_SECONDS)
        decided = time.monotonic()
        decide(approval_id)
        answer, _ = waiting.result()
        return answer, time.monotonic() - decided


def _in_thread(fn, *args):
    # Announcing uses async_to_sync, as the web server's request threads do.
    worker = threading.Thread(target=fn, args=args)
    worker.start()
    worker.join(10)


def test_a_decision_wakes_the_wait_at_once(server, gateway_auth, token, make_grant):
    make_grant(slug="ask-me", host="ask.example.com", mode="ask")
    user = approver()
    approved, after = _decided_while_waiting(
        server, gateway_auth, token, lambda pk: _in_thread(approval_decide, pk, user, True, "web"))
    assert approved["status"] == "approved" and approved["decision"]["verdict"] == "allow"
    assert after < QUICK_SECONDS, f"released {after:.1f}s after the approval: it waited for a poll"
    refused, after = _decided_while_waiting(
        server, gateway_auth, token, lambda pk: _in_thread(approval_decide, pk, user, False, "web"))
    assert refused["status"] == "refused" and refused["decision"]["reason"] == "approval_refused"
    assert after < QUICK_SECONDS, f"released {after:.1f}s after the refusal: it waited for a poll"


def test_an_announcement_alone_releases_nothing(server, gateway_auth, token, make_grant):
    """Anyone who could write to the group still only makes the wait read the database again."""
    make_grant(slug="ask-me", host="ask.example.com", mode="ask")
    approval_id = _ask(server, gateway_auth, token)
    with ThreadPoolExecutor(1) as bg:
        waiting = bg.submit(_wait, server, gateway_auth, approval_id, 3)
        time.sleep(IN_FLIGHT_SECONDS)
        _in_thread(approval_changed, approval_id, Approval.Status.APPROVED)
        answer, _ = waiting.result()
    assert answer["status"] == "pending" and answer["decision"] is None
    assert Approval.objects.get(pk=approval_id).status == Approval.Status.PENDING
    assert not AuditRecord.objects.filter(kind="decision", verdict="allow").exists()


def test_an_expiry_nobody_announces_is_answered_at_the_expiry(server, gateway_auth, token, make_grant):
    make_grant(slug="ask-me", host="ask.example.com", mode="ask")
    approval_id = _ask(server, gateway_auth, token)
    Approval.objects.filter(pk=approval_id).update(expires_at=timezone.now() + timedelta(seconds=2))
    answer, took = _wait(server, gateway_auth, approval_id)
    assert answer["status"] == "expired" and answer["decision"]["reason"] == "approval_expired"
    assert took < QUICK_SECONDS


def test_without_announcements_the_wait_polls(tmp_path, gateway_auth, token, make_grant, announced):
    """No Redis for the server's channel layer: the wait falls back on the short database poll."""
    PolicyVersion.objects.get_or_create(pk=1)
    make_grant(slug="ask-me", host="ask.example.com", mode="ask")
    nowhere = f"redis://127.0.0.1:{procs.free_port()}/0"
    env = _env(nowhere, ROSTER_APPROVAL_POLL_SECONDS="0.05")
    user = approver()
    with procs.decision_api_server(env, tmp_path) as url:
        procs.wait_for_http(f"{url}/api/gateway/health", timeout=30)
        answer, after = _decided_while_waiting(
            url, gateway_auth, token, lambda pk: approval_decide(pk, user, True, "cli"))
    assert answer["status"] == "approved"
    assert after < QUICK_SECONDS
    assert "polling" in (tmp_path / "decision-api.log").read_text()
