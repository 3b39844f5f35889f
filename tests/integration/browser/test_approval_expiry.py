"""An unanswered held request expires: the client gets approval_expired and every open page drops it."""

from __future__ import annotations

import pytest

from tests.integration.browser import harness
from tests.integration.browser.conftest import hold

pytestmark = [pytest.mark.integration, pytest.mark.browser]


@pytest.fixture(scope="module")
def approval_ttl_seconds() -> int:
    return 4


def test_unanswered_request_expires_for_client_and_page(world, page_for):
    alice = page_for(world["alice"])
    alice.evaluate("window.__noReload = 1")
    upstream_before = len(harness._Upstream.received)
    request = hold(world)
    alice.wait_for_selector("article.approval", timeout=20000)
    countdown = alice.locator("article.approval time.countdown")
    first = countdown.inner_text()
    # time left must count down (a changed text within a few seconds; the page ticks every second)
    alice.wait_for_function(
        "first => document.querySelector('article.approval time.countdown')?.textContent !== first",
        arg=first, timeout=3000)
    harness.shot(alice, "09-queue-counting-down")
    response = request.result(timeout=40)
    assert response.status_code == 403
    assert response.headers["x-roster-deny-reason"] == "approval_expired"
    alice.wait_for_selector("article.approval", state="detached", timeout=15000)
    # ...and stays in view, in "Recently decided", as expired
    alice.wait_for_selector('table.recent tr[data-status="expired"]', timeout=15000)
    assert "expired" in alice.locator('table.recent tr[data-status="expired"] td.status').first.inner_text()
    harness.shot(alice, "10-expired-in-recently-decided")
    assert alice.evaluate("window.__noReload") == 1
    assert len(harness._Upstream.received) == upstream_before  # nothing reached the upstream
