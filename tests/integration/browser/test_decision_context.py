"""Decisions with context in a real browser: a deny's comment reaches the box in its 403 and the page
confirms the request in words; a card says when the box stopped waiting and when its run has ended."""

from __future__ import annotations

import re
import threading

import pytest

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_abandon
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_set_status
from tests.integration.browser import harness
from tests.integration.browser.conftest import hold

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def test_deny_with_comment_reaches_the_box_and_is_confirmed_in_words(world, page_for):
    alice = page_for(world["alice"])
    upstream_before = len(harness._Upstream.received)
    request = hold(world, path="/v1/send?to=team")
    card = alice.wait_for_selector("article.approval", timeout=20000)
    alice.fill("article.approval textarea[name=comment]", "Not during the release freeze")
    alice.wait_for_selector("article.approval button.deny:enabled", timeout=5000)
    harness.shot(alice, "20-deny-with-comment")
    assert card is not None
    alice.click("article.approval button.deny")
    response = request.result(timeout=40)
    assert response.status_code == 403
    body = response.json()
    assert body["reason"] == "approval_refused"
    assert body["comment"] == "Not during the release freeze"
    assert body["message"] == "refused by alice via web: Not during the release freeze"
    assert len(harness._Upstream.received) == upstream_before
    confirmation = alice.locator("ul.messages li").inner_text()
    # The confirmation keeps the port (issue 27.5).
    assert re.match(r"Denied POST 127\.0\.0\.1:\d+/v1/send for mailer \(run ", confirmation), confirmation
    assert "Not during the release freeze" in confirmation
    assert alice.locator("table.recent td.comment").first.inner_text() == "Not during the release freeze"
    harness.shot(alice, "21-denied-confirmation")


def test_card_says_box_stopped_waiting_then_run_ended(world, page_for):
    alice = page_for(world["alice"])
    request = hold(world, path="/v1/send?to=ops")
    alice.wait_for_selector("article.approval", timeout=20000)
    approval = Approval.objects.get(status=Approval.Status.PENDING, run=world["run"])
    assert alice.locator(".card-state").count() == 0
    # What the gateway reports when its hold ends; from another thread, as the web server's request threads
    # do (this one runs Playwright's event loop, where the announcement to open pages cannot be made).
    abandoning = threading.Thread(target=approval_abandon, args=(approval.pk,))
    abandoning.start()
    abandoning.join(10)
    alice.wait_for_selector(".card-state.abandoned", timeout=10000)
    assert "identical retry" in alice.locator(".card-state.abandoned").inner_text()
    assert alice.locator("article.approval button.approve").count() == 1
    harness.shot(alice, "22-card-box-stopped-waiting")
    run_set_status(world["run"].pk, Run.Status.CANCELLED)
    alice.reload()
    alice.wait_for_selector(".card-state.run-ended", timeout=10000)
    assert alice.locator("article.approval button.approve").count() == 0
    assert alice.locator("article.approval button.deny").count() == 1
    harness.shot(alice, "23-card-run-ended")
    alice.click("article.approval button.deny")  # clearing it stays possible
    assert request.result(timeout=40).status_code == 403


def test_user_without_a_role_sees_why_and_can_sign_out(world, page_for, stack):
    from django.contrib.auth.models import User

    eve = User.objects.create_user("eve", password=None)
    page = page_for(eve, "/")
    assert page.locator("h1#no-role").inner_text() == "Your account has no role yet"
    harness.shot(page, "24-no-role")
    page.click("#no-role-sign-out")
    page.wait_for_url(lambda url: "/accounts/logout/" in url, timeout=10000)
    page.goto(stack["base_url"] + "/")
    assert "/accounts/login/" in page.url


NOTIFICATION_SPY = """
window.__notes = [];
Object.defineProperty(document, "hidden", {get: () => window.__hidden === true});
class SpyNotification { constructor(title, options) { window.__notes.push([title, options && options.body]); }
  static get permission() { return "granted"; }
  static requestPermission() { return Promise.resolve("granted"); }
  close() {} }
window.Notification = SpyNotification;
"""


def test_background_tab_notification_is_opt_in(world, browser):
    context = browser.new_context(viewport={"width": 1200, "height": 700})
    context.add_cookies([harness.session_cookie(world["alice"], world["base_url"])])
    context.add_init_script(NOTIFICATION_SPY)
    page = context.new_page()
    try:
        page.goto(world["base_url"] + "/approvals/")
        page.wait_for_selector('#live-state[data-state="open"]', timeout=15000)
        page.evaluate("window.__hidden = true")
        first = hold(world, path="/v1/send?to=first")
        page.wait_for_selector("article.approval", timeout=20000)
        assert page.evaluate("window.__notes.length") == 0  # not opted in: nothing
        page.click("#notify-toggle")
        page.wait_for_selector("#notify-state:has-text('on')")
        harness.shot(page, "29-notifications-opted-in")
        second = hold(world, path="/v1/send?to=second")
        page.wait_for_function("() => window.__notes.length === 1", timeout=20000)
        title, body = page.evaluate("window.__notes[0]")
        assert title == "Roster: 2 held requests waiting" and body == "1 new since you looked"
        assert "second" not in title + body  # never what a box wrote
        for approval in Approval.objects.filter(status=Approval.Status.PENDING):
            approval_decide_in_thread(approval.pk, world["alice"])
        first.result(timeout=40)
        second.result(timeout=40)
    finally:
        context.close()


def approval_decide_in_thread(approval_id, user) -> None:
    import threading

    from controlplane.approvals.services import approval_decide

    worker = threading.Thread(target=approval_decide, args=(approval_id, user, False, "cli"))
    worker.start()
    worker.join(20)
