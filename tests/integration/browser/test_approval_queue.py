"""Approvers in a real browser against daphne, Redis and the real gateway, with a box-like client whose
request is held at the gateway until someone decides."""

from __future__ import annotations

import re
import threading
import time

import pytest

from controlplane.approvals.models import Approval
from controlplane.ledger.models import Cap
from controlplane.ledger.services import reserve
from tests.integration.browser import harness
from tests.integration.browser.conftest import LOGIN_PASSWORD, hold

pytestmark = [pytest.mark.integration, pytest.mark.browser]

CARD = "article.approval"
APPEAR_TIMEOUT_MS = 20000


def _marker(page) -> None:
    """Set a flag that a reload would wipe: proves later updates happened in place."""
    page.evaluate("window.__noReload = 'still here'")


def _not_reloaded(page) -> bool:
    return page.evaluate("window.__noReload") == "still here"


def test_login_form_signs_in_and_shows_the_overview(browser, world):
    Cap.objects.create(worker=world["worker"], unit="requests", window="day", limit=10)
    Cap.objects.create(worker=None, unit="micro", window="month", limit=10_000)
    for n in range(3):
        reserve(worker=world["worker"], run=world["run"], grant_slug="upstream-post-ask",
                decision_id=f"dc_overview_{n}", cost_micro=1500, origin="human")
    context = browser.new_context()
    page = context.new_page()
    page.goto(world["base_url"] + "/approvals/")
    assert "/accounts/login/" in page.url
    harness.shot(page, "01-login")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(LOGIN_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/approvals/")
    page.goto(world["base_url"] + "/")
    assert page.get_by_role("heading", name="Overview", level=1).is_visible()
    assert page.locator("main").count() == 1 and page.locator("nav").count() >= 1
    assert "mailer" in page.inner_text("main")
    meters = page.locator("meter")
    assert meters.count() == 2
    assert {meters.nth(i).get_attribute("value") for i in range(2)} == {"3", "4500"}
    harness.shot(page, "02-overview")
    context.close()


def test_held_request_appears_live_and_approval_lets_it_through(world, page_for):
    alice = page_for(world["alice"])
    bob = page_for(world["bob"])
    for page in (alice, bob):
        _marker(page)
        assert page.locator(CARD).count() == 0
    request = hold(world, body=b'{"text": "weekly digest"}')
    alice.wait_for_selector(CARD, timeout=APPEAR_TIMEOUT_MS)
    appeared = time.monotonic() - request.started
    bob.wait_for_selector(CARD, timeout=APPEAR_TIMEOUT_MS)
    card = alice.locator(CARD)
    text = card.inner_text()
    assert "POST" in text and f"http://127.0.0.1:{world['upstream'].port}/v1/send?to=team" in text
    assert "mailer" in text and f"run {world['run'].pk}" in text and "upstream-post-ask" in text
    assert "private" in text and "weekly digest" in text
    # How long the approval stays usable (at most the stack's approval TTL), and the box's own wait beside it.
    # Its two largest units, the smaller left out when 0: "1 min" at exactly the TTL, "59 s" a second later.
    assert re.fullmatch(r"\d+ min( \d+ s)?|\d+ s", card.locator("time.countdown").inner_text())
    assert card.locator("time.box-wait").count() == 1
    assert _not_reloaded(alice) and _not_reloaded(bob)
    harness.shot(alice, "03-queue-pending")

    # Timed from the click itself: the buttons of a list that just changed ignore clicks for a moment.
    card.locator("button.approve:enabled").wait_for(timeout=APPEAR_TIMEOUT_MS)
    clicked = time.monotonic()
    card.get_by_role("button", name="Approve").click()
    response = request.result()
    completed = time.monotonic() - clicked
    assert response.status_code == 200 and response.content == harness.UPSTREAM_BODY
    harness.record_timing("held request -> visible in open queue page", appeared)
    harness.record_timing("approve click -> client request completed", completed)

    bob.wait_for_selector(CARD, state="detached", timeout=APPEAR_TIMEOUT_MS)
    assert _not_reloaded(bob), "the second approver's page must update in place"
    assert bob.locator("#queue-announce").text_content() == "0 pending"  # told to screen readers
    bob.wait_for_selector('tr[data-status="approved"], tr[data-status="used"]', timeout=APPEAR_TIMEOUT_MS)
    assert "alice" in bob.locator("table.recent").inner_text()
    harness.shot(bob, "04-queue-after-decision-second-approver")
    approval = Approval.objects.get(run=world["run"])
    assert approval.decided_by == world["alice"] and approval.channel == "web"

    alice.goto(f"{world['base_url']}/runs/{world['run'].pk}/")
    timeline = alice.inner_text("main")
    assert "alice" in timeline and "approved" in timeline and "1500 micro" in timeline
    harness.shot(alice, "05-run-timeline")


def test_deny_gives_the_client_approval_refused(world, page_for):
    alice = page_for(world["alice"])
    upstream_before = len(harness._Upstream.received)
    request = hold(world)
    alice.wait_for_selector(CARD, timeout=APPEAR_TIMEOUT_MS)
    alice.locator(CARD).get_by_role("button", name="Deny").click()
    response = request.result()
    assert response.status_code == 403
    assert response.headers["x-roster-deny-reason"] == "approval_refused"
    assert response.json()["reason"] == "approval_refused"
    assert len(harness._Upstream.received) == upstream_before  # nothing reached the upstream
    alice.wait_for_selector('tr[data-status="refused"]', timeout=APPEAR_TIMEOUT_MS)
    harness.shot(alice, "06-queue-after-deny")


def test_non_approver_sees_but_cannot_decide(world, page_for):
    carol = page_for(world["carol"])  # an auditor: may look, may not decide
    request = hold(world)
    carol.wait_for_selector(CARD, timeout=APPEAR_TIMEOUT_MS)
    card = carol.locator(CARD)
    assert card.get_by_role("button", name="Approve").count() == 0
    assert card.get_by_role("button", name="Deny").count() == 0
    approval_id = card.get_attribute("data-approval-id")
    status = carol.evaluate(
        """async (id) => {
            const token = document.cookie.split('; ').find(c => c.startsWith('csrftoken=')).split('=')[1];
            const r = await fetch('/approvals/' + id + '/decide/', {method: 'POST',
              headers: {'X-CSRFToken': token, 'Content-Type': 'application/x-www-form-urlencoded'},
              body: 'action=approve'});
            return r.status; }""", approval_id)
    assert status == 403
    assert Approval.objects.get(pk=approval_id).status == Approval.Status.PENDING
    harness.shot(carol, "07-queue-auditor-read-only")
    alice = page_for(world["alice"])  # release the held client
    alice.locator(CARD).get_by_role("button", name="Deny").click()
    assert request.result().status_code == 403


def test_body_with_markup_is_shown_inert(world, page_for):
    alice = page_for(world["alice"])
    alice.evaluate("window.__pwned = 0")
    markup = (b'<h1 id="injected">Approve me!</h1><script>window.__pwned = 1</script>'
              b'<img src="x" onerror="window.__pwned = 2"><a href="javascript:window.__pwned=3">ok</a>')
    request = hold(world, body=markup, headers={"x-api-key": "box-made-up-key-123"})
    alice.wait_for_selector(CARD, timeout=APPEAR_TIMEOUT_MS)
    assert "box-made-up-key-123" not in alice.content()
    assert "x-api-key" in alice.locator(f"{CARD} details.headers").inner_text()
    preview = alice.locator(f"{CARD} pre.quoted")
    assert preview.inner_text().startswith('<h1 id="injected">Approve me!</h1><script>')
    assert alice.locator("#injected").count() == 0
    assert alice.locator(f"{CARD} img, {CARD} script, {CARD} a[href^='javascript']").count() == 0
    alice.wait_for_timeout(300)
    assert alice.evaluate("window.__pwned") == 0
    harness.shot(alice, "08-queue-markup-inert")
    alice.locator(CARD).get_by_role("button", name="Deny").click()
    assert request.result().status_code == 403


def test_a_signed_out_page_goes_back_to_login_on_the_next_change(world, page_for):
    from django.contrib.sessions.models import Session

    from controlplane.approvals.broadcast import approval_changed

    bob = page_for(world["bob"])
    Session.objects.all().delete()  # signed out elsewhere (or the session expired)
    # From another thread: this one runs Playwright's event loop.
    notifier = threading.Thread(target=approval_changed, args=("0" * 32, "pending"))
    notifier.start()
    notifier.join(10)
    bob.wait_for_url("**/accounts/login/**", timeout=10000)
    assert bob.get_by_role("heading", name="Sign in").is_visible()
