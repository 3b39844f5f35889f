"""Issue 27.1 in Chromium, through the real gateway: the approval card counts down the box's own wait (the
gateway's hold, ROSTER_APPROVAL_HOLD_SECONDS, here 6 s) apart from how long the approval can still be given
(60 s); when the box gives up (`approval_expired`) the box's countdown stops for good and the card says
the box stopped waiting while the approval stays decidable for an identical retry; the overview's
held-request chart counts what the box waited (about 6 s), not the approval's life."""

from __future__ import annotations

import re
import time

import pytest

from tests.integration.browser import harness
from tests.integration.browser.conftest import hold

pytestmark = [pytest.mark.integration, pytest.mark.browser]
HOLD_SECONDS = 6


@pytest.fixture(scope="module")
def approval_ttl_seconds() -> int:
    return 60


@pytest.fixture(scope="module")
def approval_hold_seconds() -> int:
    return HOLD_SECONDS


def test_the_card_counts_the_box_wait_then_says_it_stopped(world, page_for):
    alice = page_for(world["alice"])
    request = hold(world)
    alice.wait_for_selector("article.approval time.box-wait[data-box-until]", timeout=20000)
    box_wait = alice.locator("article.approval time.box-wait")
    assert re.fullmatch(r"[1-6] s", box_wait.inner_text()), box_wait.inner_text()
    approval_left = alice.locator("article.approval time.countdown").inner_text()
    assert re.fullmatch(r"(59|60) s|1 min|5\d s", approval_left), approval_left
    harness.shot(alice, "27-1-card-box-waiting")

    response = request.result(timeout=40)
    waited = request.finished - request.started
    assert response.status_code == 403
    assert response.headers["x-roster-deny-reason"] == "approval_expired"
    assert waited < HOLD_SECONDS + 10  # the box's wait, not the approval's 60 s

    alice.wait_for_selector("article.approval time.box-wait[data-stopped]", timeout=15000)
    alice.wait_for_selector("article.approval p.card-state.abandoned", timeout=15000)
    assert box_wait.inner_text() == "stopped waiting"
    card = alice.locator("article.approval").inner_text()
    assert "The box stopped waiting" in card and "Can be approved, for an identical retry, for" in card
    countdown = alice.locator("article.approval time.countdown")
    first = countdown.inner_text()
    time.sleep(2.5)  # the page ticks every second: the box's countdown must not come back
    assert box_wait.inner_text() == "stopped waiting"
    assert countdown.inner_text() != first and re.fullmatch(r"\d+ s", countdown.inner_text())
    harness.shot(alice, "27-1-card-box-stopped-waiting")

    overview = page_for(world["alice"], "/")
    summary = overview.locator("#wait-chart .chart-summary").inner_text()
    assert re.search(r"1 abandoned \(median ([4-9]|1\d) s, longest ([4-9]|1\d) s\)", summary), summary
    harness.shot(overview, "27-1-overview-wait-chart")
