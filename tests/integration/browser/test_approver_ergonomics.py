"""Issue 27.8 in Chromium against daphne, Redis and the real gateway: the queue filtered by worker (the
live list keeps the filter), the grant's description on the card, a time-boxed approval that lets the
identical request through without a card (and nothing else), its confirmation in words, and its revoke."""

from __future__ import annotations

import threading

import pytest

from controlplane.approvals.broadcast import approval_changed
from controlplane.approvals.models import Approval
from controlplane.fleet.services import run_create, worker_create
from controlplane.policy.models import Grant
from tests.integration.browser import harness
from tests.integration.browser.conftest import hold
from tests.web.conftest import open_approval

pytestmark = [pytest.mark.integration, pytest.mark.browser]

CARD = "article.approval"
TIMEOUT_MS = 20000
WHY = "Sends the digest to the team's list: a person checks each send."
BODY = b'{"text": "weekly digest"}'


def _push(approval_id, status) -> None:
    # From another thread: this one runs Playwright's event loop (a change made here cannot announce
    # itself), so the open pages are told as the server would tell them.
    notifier = threading.Thread(target=approval_changed, args=(str(approval_id), status))
    notifier.start()
    notifier.join(10)


def _approve_for_ten_minutes(page) -> None:
    card = page.locator(CARD)
    card.locator("button.approve:enabled").wait_for(timeout=TIMEOUT_MS)
    card.get_by_label("also allow identical requests", exact=False).select_option("10")
    card.get_by_role("button", name="Approve").click()
    page.wait_for_selector("ul.messages li", timeout=TIMEOUT_MS)


def test_filter_description_and_a_time_boxed_approval(world, page_for):
    Grant.objects.filter(pk=world["grant"].pk).update(description=WHY)
    other = worker_create("reporter")
    other_run, _ = run_create(other, command=["report"])
    open_approval(other_run, url="https://api.example.com/other-worker")

    alice = page_for(world["alice"], "/approvals/")
    assert alice.locator(CARD).count() == 1 and "reporter" in alice.locator(CARD).inner_text()
    # The card's worker link narrows the queue; held requests of other workers stay out of it, live.
    first = hold(world, body=BODY)
    alice.wait_for_selector(f"{CARD} >> text=mailer", timeout=TIMEOUT_MS)
    alice.locator(CARD, has_text="/v1/send").locator("a.filter-by-worker").click()
    alice.wait_for_selector('#live-state[data-state="open"]', timeout=TIMEOUT_MS)
    assert "?worker=mailer" in alice.url
    assert alice.locator(".queue-filter").inner_text().startswith("Showing only worker mailer")
    arriving = open_approval(other_run, url="https://api.example.com/arrives-while-filtered")
    alice.evaluate("window.__fetched = 0; const f = window.fetch; window.fetch = (...a) => "
                   "{ window.__fetched++; return f(...a); }")
    _push(arriving.pk, "pending")
    alice.wait_for_function("window.__fetched > 0", timeout=TIMEOUT_MS)  # the page fetched its list
    alice.wait_for_timeout(500)
    assert alice.locator(CARD).count() == 1 and "arrives-while-filtered" not in alice.inner_text("main")
    card = alice.locator(CARD)
    assert WHY in card.locator(".grant-description").inner_text()
    harness.shot(alice, "27-8-queue-filtered-with-description")

    _approve_for_ten_minutes(alice)
    said = alice.locator("ul.messages li").first.inner_text()
    assert said.startswith(f"Approved POST 127.0.0.1:{world['upstream'].port}/v1/send for mailer")
    assert "identical requests of mailer pass without asking until" in said
    assert first.result().status_code == 200
    assert "?worker=mailer" in alice.url
    alice.wait_for_selector("table.open-windows", timeout=TIMEOUT_MS)
    harness.shot(alice, "27-8-time-boxed-approval-confirmed")

    # The identical request passes with no card; another body asks.
    assert hold(world, body=BODY).result(timeout=30).status_code == 200
    assert Approval.objects.filter(run=world["run"]).count() == 1
    different = hold(world, body=b'{"text": "something else"}')
    alice.wait_for_selector(CARD, timeout=TIMEOUT_MS)
    alice.locator(CARD).locator("button.deny:enabled").wait_for(timeout=TIMEOUT_MS)
    alice.locator(CARD).get_by_role("button", name="Deny").click()
    assert different.result().status_code == 403

    # Revoked: the identical request asks again.
    alice.wait_for_selector("button.revoke-window", timeout=TIMEOUT_MS)
    alice.locator("button.revoke-window").click()
    alice.wait_for_selector("ul.messages li", timeout=TIMEOUT_MS)
    assert alice.locator("ul.messages li").first.inner_text().startswith("Revoked: identical POST")
    assert alice.locator("table.open-windows").count() == 0
    harness.shot(alice, "27-8-time-box-revoked")
    again = hold(world, body=BODY)
    alice.wait_for_selector(CARD, timeout=TIMEOUT_MS)
    alice.locator(CARD).locator("button.deny:enabled").wait_for(timeout=TIMEOUT_MS)
    alice.locator(CARD).get_by_role("button", name="Deny").click()
    assert again.result().status_code == 403


def test_a_card_whose_run_ended_closes_live_and_an_ask_over_budget_asks_nobody(world, page_for):
    """Issue 27.4: the sweep closes a held request of an ended run (the open page drops the card and says
    why under Recently decided); an `ask` for a worker over its cap is refused without a card."""
    from controlplane.approvals.services import approval_expire_due
    from controlplane.fleet.models import Run
    from controlplane.fleet.services import run_set_status
    from controlplane.ledger.models import Cap

    other_run, _ = run_create(world["worker"], command=["digest"])
    approval = open_approval(other_run, url="https://api.example.com/left-behind")
    alice = page_for(world["alice"])
    alice.wait_for_selector(f"#approval-{approval.pk}", timeout=TIMEOUT_MS)
    run_set_status(other_run.pk, Run.Status.STARTING)
    run_set_status(other_run.pk, Run.Status.FAILED, reason="box exited")
    assert approval_expire_due() == 1
    _push(approval.pk, "expired")
    alice.wait_for_selector(f"#approval-{approval.pk}", state="detached", timeout=TIMEOUT_MS)
    row = alice.locator(f"#decided-{approval.pk}")
    assert f"closed — run {other_run.pk} ended (failed), nobody needs to answer" in row.inner_text()
    harness.shot(alice, "27-4-card-closed-when-its-run-ended")

    Cap.objects.create(worker=world["worker"], unit="micro", window="day", limit=1000)  # grant costs 1500
    response = hold(world, body=BODY).result(timeout=30)
    assert response.status_code == 402
    assert response.headers["x-roster-deny-reason"] == "over_budget"
    assert not Approval.objects.filter(run=world["run"]).exists()
    alice.wait_for_timeout(1000)
    assert alice.locator(CARD).count() == 0
