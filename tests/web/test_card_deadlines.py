"""Issue 27.1: the approval card shows the box's own wait (the gateway's hold) apart from how long the
approval can still be given (it said "Time left 4 min 58 s" while the box waited 60 s)."""

from __future__ import annotations

import re

from django.utils import timezone

from controlplane.approvals.models import Approval
from tests.web.conftest import open_approval
from tests.web.test_approval_views import QUEUE, _login


def _text(html: str, cls: str) -> str:
    part = html[html.index(f'class="{cls}'):]
    return part[part.index(">") + 1:part.index("</time>")]


def test_card_shows_the_box_wait_and_the_approval_window_apart(approver, run, settings):
    settings.ROSTER_APPROVAL_TTL_SECONDS = 300
    settings.ROSTER_APPROVAL_HOLD_SECONDS = 60
    settings.ROSTER_APPROVAL_GRACE_SECONDS = 120
    approval = open_approval(run)
    html = _login(approver).get(QUEUE).content.decode()
    assert "The box waits" in html and "Can be approved for" in html
    assert re.fullmatch(r"(59|60) s|1 min", _text(html, "box-wait")), _text(html, "box-wait")
    assert re.fullmatch(r"4 min \d\d? s|5 min", _text(html, "countdown"))
    assert "an identical retry passes within 2 min" in html
    Approval.objects.filter(pk=approval.pk).update(abandoned_at=timezone.now())
    html = _login(approver).get(QUEUE).content.decode()
    assert _text(html, "box-wait") == "stopped waiting"
    # Nothing left to count down: without data-box-until the queue's script leaves it (issue 27.1).
    assert 'data-stopped="1"' in html and "data-box-until" not in html
    assert "Can be approved, for an identical retry, for" in html
    assert re.fullmatch(r"4 min \d\d? s|5 min", _text(html, "countdown"))  # still decidable
