"""Issue 27.12: `proposal list` starts with a header naming its columns; `proposal show` answers where the
proposal stands first: its status, who decided it (a person or an earned-trust rule), the reason, and
the outcome."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from tests.proposals.servers import webhook_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def _show(proposal_id: str) -> dict:
    out = io.StringIO()
    call_command("proposal", "show", proposal_id, stdout=out)
    return json.loads(out.getvalue())


def test_list_has_a_header_and_show_has_status_decider_and_outcome(gw, token, make_destination, approver):
    with webhook_server() as (port, _receiver):
        make_destination("hooks", kind="webhook", url=f"http://127.0.0.1:{port}/in", method="POST")
        first = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {"n": 1}})[1]["id"]
        second = gw.propose(token, {"kind": "webhook", "destination": "hooks", "payload": {"n": 2}})[1]["id"]
        listing = io.StringIO()
        call_command("proposal", "list", stdout=listing)
        lines = listing.getvalue().splitlines()
        assert lines[0].split("\t")[:6] == ["id", "status", "worker", "run", "kind", "destination"]
        assert len(lines) == 3 and all(line.count("\t") >= 6 for line in lines[1:])
        pending = _show(first)
        assert (pending["status"], pending["decided_by"], pending["outcome"]) == ("pending", None, None)
        assert pending["expires"].endswith(" UTC") and pending["expires"][:4].isdigit()  # date and zone
        call_command("proposal", "decide", first, "approve", "--user", approver.username,
                     stdout=io.StringIO())
        call_command("proposal", "decide", second, "refuse", "--user", approver.username, "--reason", "dup",
                     stdout=io.StringIO())
    done = _show(first)
    assert done["status"] == "executed" and done["decided_by"] == approver.username
    assert done["channel"] == "cli" and done["outcome"] and done["executed"].endswith(" UTC")
    refused = _show(second)
    assert (refused["status"], refused["decided_by"], refused["reason"]) == (
        "refused", approver.username, "dup")
    assert refused["outcome"] is None and refused["executed"] is None
