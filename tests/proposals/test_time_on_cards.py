"""Issue 27.10 on the proposal card: a day-long wait reads "23 h 59 min", not "1439 min 58 s", and the
deadline names its date and zone."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_day_long_wait_reads_in_hours(gw, token, make_destination, approver, settings):
    settings.ROSTER_PROPOSAL_TTL_SECONDS = 24 * 3600
    make_destination("hooks", kind="webhook", url="https://hooks.example.com/in", method="POST")
    gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {}})
    client = Client()
    client.force_login(approver)
    html = client.get("/approvals/").content.decode()
    countdown = html[html.index('class="countdown"'):]
    countdown = countdown[countdown.index(">") + 1:countdown.index("</time>")]
    assert countdown in ("23 h 59 min", "1 d")  # whole seconds pass between the proposal and the page
    assert " min " not in countdown.replace("h 59 min", "") and "1439" not in html
