"""An e-mail proposal from a box-like client, through the real gateway's reserved name, appears live in an
approver's browser with the e-mail as it will be sent; Approve sends it to a real SMTP server, once."""

from __future__ import annotations

import time

import httpx
import pytest

from controlplane.proposals.models import Proposal
from controlplane.proposals.services import destination_save, execute_once
from controlplane.proposals.validation import validate_destination
from tests.integration.browser import harness
from tests.proposals.servers import smtp_server

pytestmark = [pytest.mark.integration, pytest.mark.browser]

CARD = "article.proposal"


def test_approving_an_email_proposal_in_the_queue_sends_it_once(world, page_for):
    with smtp_server() as (port, mailbox):
        destination_save(
            validate_destination(
                {
                    "kind": "smtp",
                    "smtp_host": "127.0.0.1",
                    "smtp_port": port,
                    "starttls": False,
                    "from_address": "digest@example.com",
                    "allowed_recipients": ["@example.com"],
                },
                name="mail",
            )
        )
        alice = page_for(world["alice"])
        assert alice.locator(CARD).count() == 0
        proxy = world["gateway"].proxy_url_with(world["token"])
        with httpx.Client(proxy=proxy, timeout=30) as box:
            answer = box.post(
                "http://proposals.roster.invalid/v1/proposals",
                json={
                    "kind": "email",
                    "destination": "mail",
                    "payload": {
                        "to": ["team@example.com"],
                        "subject": "Weekly digest",
                        "body": "Three things happened this week.",
                        "attachments": [
                            {
                                "filename": "digest.txt",
                                "content_type": "text/plain",
                                "content_b64": "aGVsbG8=",
                            }
                        ],
                    },
                },
            )
        assert answer.status_code == 201, answer.text
        proposal_id = answer.json()["id"]
        alice.wait_for_selector(CARD, timeout=20000)
        card = alice.locator(CARD)
        text = card.inner_text()
        assert "From: digest@example.com" in text and "To: team@example.com" in text
        assert "Subject: Weekly digest" in text and "Three things happened this week." in text
        assert "digest.txt" in text and f"run {world['run'].pk}" in text
        harness.shot(alice, "proposal-01-email-pending")
        card.get_by_label("Reason (optional)").fill("digest looks right")
        alice.wait_for_timeout(1100)  # decide buttons settle for 1 s after a live swap
        card.get_by_role("button", name="Approve").click()
        # Approved, or already being performed if a Celery worker of this test session took it first.
        alice.wait_for_selector(", ".join(f'#settled-{proposal_id}[data-status="{status}"]'
                                          for status in ("approved", "executing", "executed")), timeout=20000)
        proposal = Proposal.objects.get(pk=proposal_id)
        assert proposal.status in ("approved", "executing", "executed") and proposal.channel == "web"
        assert proposal.reason == "digest looks right"
        assert proposal.decided_by.username == "alice"
        # The trusted side's executor performs it exactly once, whoever runs the step: this test runs it
        # itself; a second attempt (or a worker's) finds it taken.
        assert execute_once(proposal_id) in ("executed", "skipped")
        deadline = time.monotonic() + 20
        while Proposal.objects.get(pk=proposal_id).status != "executed" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert Proposal.objects.get(pk=proposal_id).status == "executed"
        assert execute_once(proposal_id) == "skipped"
        assert len(mailbox.messages) == 1 and b"Subject: Weekly digest" in mailbox.messages[0][2]
        alice.reload()
        alice.wait_for_selector(f'#settled-{proposal_id}[data-status="executed"]', timeout=20000)
        harness.shot(alice, "proposal-02-email-executed")
        with httpx.Client(proxy=proxy, timeout=30) as box:
            state = box.get(f"http://proposals.roster.invalid/v1/proposals/{proposal_id}").json()
        assert state["status"] == "executed" and state["outcome"] == "SMTP 250"
