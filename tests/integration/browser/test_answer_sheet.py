"""Issue 24.4 in a real browser: a request held by the real gateway, approved, carried to the upstream; the
run's answer sheet (linked from its timeline) shows the request, who approved it and the digest of the
response the upstream sent — the gateway's `response_sha256`, computed as the bytes passed — and its
record links lead to that one audit record."""

from __future__ import annotations

import hashlib
import threading
import time

import pytest

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_decide
from controlplane.fleet.models import RunDecision
from tests.integration.browser import harness
from tests.integration.browser.conftest import hold

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def _approved_and_fetched(world) -> bytes:
    request = hold(world, body=b"fetch me")
    deadline = time.monotonic() + 20
    while not Approval.objects.filter(run=world["run"], status="pending").exists():
        assert time.monotonic() < deadline, "the held request never opened an approval"
        time.sleep(0.05)
    approval_id = Approval.objects.get(run=world["run"]).pk
    # In its own thread: this one runs Playwright's event loop, where the broadcast can't block.
    decider = threading.Thread(target=approval_decide, args=(approval_id, world["bob"], True, "web"))
    decider.start()
    decider.join(20)
    response = request.result()
    assert response.status_code == 200
    # The outcome is reported in the background, batched: wait for the control plane to have it.
    deadline = time.monotonic() + 20
    while not RunDecision.objects.filter(run=world["run"]).exclude(response_sha256="").exists():
        assert time.monotonic() < deadline, "no outcome with a response digest arrived"
        time.sleep(0.1)
    return response.content


def test_the_answer_sheet_shows_the_approval_and_the_response_digest(world, page_for):
    body = _approved_and_fetched(world)
    digest = hashlib.sha256(body).hexdigest()
    assert RunDecision.objects.get(run=world["run"], outcome_at__isnull=False).response_sha256 == digest

    alice = page_for(world["alice"], f"/runs/{world['run'].pk}/")
    alice.locator("#answer-sheet").click()
    alice.wait_for_selector("#answers-fetched")
    harness.shot(alice, "24-answer-sheet")
    fetched = alice.inner_text("#answers-fetched")
    assert digest in fetched and "/v1/send?to=team" in fetched
    assert "bob" in alice.inner_text("#answers-approvals")
    assert "allow" in alice.inner_text("#answers-requests")

    carol = page_for(world["carol"], f"/runs/{world['run'].pk}/answers/")
    link = carol.locator("#answers-fetched a.audit-link").first
    seq = link.inner_text().lstrip("#")
    link.click()
    carol.wait_for_selector(f'tr[data-seq="{seq}"]')
    assert carol.locator("tr[data-seq]").count() == 1
    harness.shot(carol, "24-answer-sheet-record")
