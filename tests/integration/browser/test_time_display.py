"""Issue 27.10 in Chromium: the queue's live countdown writes a day-long proposal wait as "23 h 59 min"
(it read "1439 min 58 s"), a held request's in min and s, and the run timeline names the zone and, for a
run of another day, the date."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from django.utils import timezone

from controlplane.fleet.models import Run
from controlplane.proposals.services import destination_save, proposal_submit
from controlplane.proposals.validation import validate_destination
from tests.integration.browser import harness
from tests.integration.browser.conftest import hold

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def _countdown(page, selector: str) -> str:
    # The page's own tick rewrites the server's text every second: wait until it has changed once.
    first = page.locator(f"{selector} time.countdown").first.inner_text()
    page.wait_for_function(
        "([sel, first]) => document.querySelector(sel + ' time.countdown')?.textContent !== first",
        arg=[selector, first], timeout=5000)
    return page.locator(f"{selector} time.countdown").first.inner_text()


def test_queue_countdowns_and_timeline_times(world, page_for, settings):
    settings.ROSTER_PROPOSAL_TTL_SECONDS = 24 * 3600
    hook = {"kind": "webhook", "url": "http://127.0.0.1:9/in", "method": "POST"}
    destination_save(validate_destination(hook, name="hooks"))
    answer = proposal_submit(world["token"], json.dumps(
        {"kind": "webhook", "destination": "hooks", "payload": {"text": "weekly"}}).encode(),
        client="127.0.0.1")  # from the run's box, as the gateway reports it
    assert answer.status in (200, 201), answer
    held = hold(world)
    alice = page_for(world["alice"])
    alice.wait_for_selector("article.approval", timeout=30000)
    request_left = _countdown(alice, "article.approval")  # the page's tick has run since it loaded...
    proposal_left = alice.locator("article.proposal time.countdown").first.inner_text()  # ...over both
    harness.shot(alice, "time-queue-countdowns")
    assert re.fullmatch(r"23 h 59 min|1 d", proposal_left), proposal_left
    assert re.fullmatch(r"(\d min )?\d\d? s|1 min", request_left), request_left
    alice.locator("article.approval button[value=deny]").first.click()
    answer = held.result(timeout=40)
    assert answer.status_code == 403, answer.text

    created = timezone.now() - dt.timedelta(days=2)
    Run.objects.filter(pk=world["run"].pk).update(created_at=created)
    timeline = page_for(world["alice"], f"/runs/{world['run'].pk}/")
    harness.shot(timeline, "time-run-timeline")
    text = timeline.locator("main").inner_text()
    assert f"{created:%Y-%m-%d %H:%M:%S} UTC" in text
    assert re.search(r"\b\d\d:\d\d:\d\d\.\d{3} UTC\b", text)  # today's records: the time, the zone
