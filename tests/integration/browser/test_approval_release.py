"""How fast an approver's click releases the held request, in the topology `make up` runs: the web server
(daphne) where the approver clicks, the decision API in its own process (where the gateway long-polls the
approval), the real gateway, and a box-side client whose request is held until the click.

The release must come from the decision's notification, not from the wait's database poll: this stack sets
the poll to far longer than any release may take, so a release that waited for a poll fails the bound.
Each click is measured hop by hop and recorded in test-artifacts/approval-release.txt (docs/operations.md,
"Approval release"); the bound asserted is generous, the number recorded is what is reported."""

from __future__ import annotations

import contextlib
import os
import statistics
import time

import pytest
from django.conf import settings as django_settings

from controlplane.approvals.models import Approval
from tests.conftest import GATEWAY_SERVICE_TOKEN
from tests.integration.browser import harness
from tests.integration.browser.conftest import DEFAULT_TTL_SECONDS, hold
from tests.support import procs

pytestmark = [pytest.mark.integration, pytest.mark.browser]

CARD = "article.approval"
# The wait's safety poll in this stack: any release slower than this came from the poll, not the push.
FALLBACK_POLL_SECONDS = 20
# Generous: a click's release takes well under a second here even on a loaded machine; a release that
# waited for the poll takes FALLBACK_POLL_SECONDS.
RELEASE_BOUND_SECONDS = 3.0
CLICKS = int(os.environ.get("ROSTER_RELEASE_CLICKS", "3"))
RELEASE_RECORD = harness.ARTIFACTS / "approval-release.txt"


@pytest.fixture(scope="module")
def stack(django_db_setup, redis_url, tmp_path_factory):
    """Web server and decision API as separate processes on the test database, the gateway asking the
    decision API (as scripts/up.sh starts them)."""
    from tests.support.gateway import gateway_process

    tmp = tmp_path_factory.mktemp("release-stack")
    db_name = str(django_settings.DATABASES["default"]["NAME"])
    env = harness.control_plane_env(db_name, redis_url, GATEWAY_SERVICE_TOKEN, DEFAULT_TTL_SECONDS)
    # Both reads the wait falls back on, slowed down: only the decision's announcement releases in time.
    env["ROSTER_APPROVAL_POLL_SECONDS"] = env["ROSTER_APPROVAL_RECHECK_SECONDS"] = str(FALLBACK_POLL_SECONDS)
    with contextlib.ExitStack() as exits:
        upstream = harness.UpstreamServer()
        exits.callback(upstream.close)
        base_url = exits.enter_context(procs.daphne_server(env, tmp))
        decision_url = exits.enter_context(procs.decision_api_server(env, tmp))
        procs.wait_for_http(base_url + "/accounts/login/", timeout=30)
        gateway = exits.enter_context(gateway_process(
            decision_url, GATEWAY_SERVICE_TOKEN, tmp, allow_loopback_upstreams=True,
            hold_seconds=DEFAULT_TTL_SECONDS + 30))
        yield {"base_url": base_url, "gateway": gateway, "upstream": upstream, "tmp": tmp}


def _click_and_measure(world, alice) -> dict[str, float]:
    """One held request released by one click; the hops in seconds. Wall clocks (this process, daphne's
    decided_at, Chromium's Date.now()) are one machine's clock; the click event is what the approver did,
    after Playwright's own checks before clicking."""
    request = hold(world, body=b'{"text": "release me"}')
    button = alice.locator(f"{CARD} button.approve:enabled")
    button.wait_for(timeout=20000)  # the card is there and its buttons have settled
    approval_id = alice.locator(CARD).get_attribute("data-approval-id")
    # Kept across the form's navigation (the page is replaced by the queue it redirects to).
    alice.evaluate("sessionStorage.removeItem('clickedAt'); document.addEventListener('click',"
                   " () => sessionStorage.setItem('clickedAt', Date.now()), {capture: true, once: true})")
    wall, mono = time.time(), time.monotonic()
    button.click()
    response = request.result()
    assert response.status_code == 200 and response.content == harness.UPSTREAM_BODY
    answered = wall + (request.finished - mono)
    approval = Approval.objects.get(pk=approval_id)
    assert approval.status == Approval.Status.USED and approval.decided_by == world["alice"]
    decided, forwarded = approval.decided_at.timestamp(), harness._Upstream.received_at[-1]
    alice.wait_for_selector(CARD, state="detached", timeout=20000)
    alice.wait_for_load_state()
    clicked = int(alice.evaluate("sessionStorage.getItem('clickedAt')")) / 1000
    return {
        "click -> response at the client": answered - clicked,
        "click -> decision taken by the web server": decided - clicked,
        "decision taken -> request forwarded upstream": forwarded - decided,
        "forwarded upstream -> response at the client": answered - forwarded,
        "Playwright click() call -> response at the client (includes its actionability checks)":
            request.finished - mono,
    }


def test_a_click_releases_the_held_request_without_waiting_for_a_poll(world, page_for):
    alice = page_for(world["alice"])
    clicks = [_click_and_measure(world, alice) for _ in range(CLICKS)]
    lines = []
    for hop in clicks[0]:
        values = [c[hop] for c in clicks]
        lines.append(f"{hop}: median {statistics.median(values) * 1000:.0f} ms, "
                     f"max {max(values) * 1000:.0f} ms over {len(values)} clicks")
    RELEASE_RECORD.parent.mkdir(parents=True, exist_ok=True)
    with RELEASE_RECORD.open("a") as fh:
        for line in lines:
            print(line)
            fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {line}\n")
    harness.shot(alice, "approval-release-after")
    slowest = max(c["Playwright click() call -> response at the client (includes its actionability checks)"]
                  for c in clicks)
    assert slowest < RELEASE_BOUND_SECONDS, (
        f"a release took {slowest:.2f}s: it waited for a database read (every {FALLBACK_POLL_SECONDS}s here)"
        " instead of being woken by the decision's announcement")
