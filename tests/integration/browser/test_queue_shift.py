"""A box decides when its held requests come and go, so it can make the list move under an approver's
cursor: the request above closes, the next card's Approve slides into the spot about to be clicked.
Right after the list changes, its buttons ignore clicks for a moment."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

from controlplane.approvals.broadcast import approval_changed
from controlplane.approvals.services import approval_decide, approval_open, request_snapshot

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def _open(run, path: str):
    snapshot = request_snapshot(method="POST", url=f"https://api.example.com{path}", headers=[],
                                body_preview="", body_sha256="ab" * 32, body_size=0)
    with transaction.atomic():
        return approval_open(run=run, grant_id=None, grant_slug="upstream-post-ask", snapshot=snapshot)


def _push(approval_id, status):
    # From another thread: this one runs Playwright's event loop.
    notifier = threading.Thread(target=approval_changed, args=(str(approval_id), status))
    notifier.start()
    notifier.join(10)


def test_buttons_that_just_moved_cannot_be_clicked_at_once(world, page_for):
    benign = _open(world["run"], "/v1/read-only")
    harmful = _open(world["run"], "/v1/transfer-everything")
    alice = page_for(world["alice"])
    alice.wait_for_selector(f"#approval-{harmful.pk} button.approve:enabled", timeout=10000)
    first = alice.locator("article.approval").first.get_attribute("id")
    assert first == f"approval-{benign.pk}"

    approval_decide(benign.pk, world["bob"], approve=False, channel="web")  # or the box abandons it
    _push(benign.pk, "refused")
    alice.wait_for_selector(f"#approval-{benign.pk}", state="detached", timeout=10000)
    moved = alice.locator(f"#approval-{harmful.pk} button.approve")
    assert moved.is_disabled(), "a card that just slid under the cursor must not take the click"
    alice.wait_for_selector(f"#approval-{harmful.pk} button.approve:enabled", timeout=5000)
