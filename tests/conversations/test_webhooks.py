"""Signed webhooks: Slack's and Mattermost's documented request checks against recorded requests; a bad
signature, a replay and an oversize body are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controlplane.conversations.models import Channel
from controlplane.relay.webhooks import Refused, slack_signature, verify, verify_mattermost, verify_slack

FIXTURES = Path(__file__).with_name("fixtures")


def _recorded(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_slacks_documented_example_signature():
    # The worked example of Slack's "Verifying requests from Slack" page: secret, timestamp, body, signature.
    case = _recorded("slack_documented_example.json")
    assert (
        slack_signature(case["signing_secret"], case["timestamp"], case["body"].encode()) == case["signature"]
    )


def test_a_recorded_slack_message_event_verifies():
    case = _recorded("slack_message_event.json")
    body = case["body"].encode()
    verified = verify_slack(case["signing_secret"], case["headers"], body, now=float(case["now"]))
    assert verified.inbound.external_id == "Ev08MFMKH6" and verified.inbound.speaker_id == "U061F7AUR"
    assert verified.inbound.text == "Is the deploy green?"


@pytest.mark.parametrize("change", ["signature", "body", "secret", "stale", "future", "missing"])
def test_slack_refusals(change):
    case = _recorded("slack_message_event.json")
    headers, body, secret, now = (
        dict(case["headers"]),
        case["body"].encode(),
        case["signing_secret"],
        case["now"],
    )
    if change == "signature":
        headers["x-slack-signature"] = "v0=" + "0" * 64
    elif change == "body":
        body = body.replace(b"green", b"red")
    elif change == "secret":
        secret = secret[:-1] + "x"
    elif change == "stale":
        now += 301
    elif change == "future":
        now -= 310
    else:
        del headers["x-slack-signature"]
    with pytest.raises(Refused) as refused:
        verify_slack(secret, headers, body, now=float(now))
    assert refused.value.status == 401


def test_slacks_url_verification_is_answered_with_its_challenge():
    case = _recorded("slack_url_verification.json")
    verified = verify_slack(
        case["signing_secret"], case["headers"], case["body"].encode(), now=float(case["now"])
    )
    assert verified.inbound is None and verified.answer == {"challenge": case["challenge"]}


@pytest.mark.parametrize("form", [True, False])
def test_a_recorded_mattermost_outgoing_webhook_verifies(form):
    case = _recorded("mattermost_outgoing.json")
    fields = case["fields"]
    if form:
        from urllib.parse import urlencode

        headers, body = {"content-type": "application/x-www-form-urlencoded"}, urlencode(fields).encode()
    else:
        headers, body = {"content-type": "application/json"}, json.dumps(fields).encode()
    verified = verify_mattermost(case["token"], headers, body, now=fields["timestamp"] / 1000 + 5)
    assert verified.inbound.external_id == fields["post_id"] and verified.inbound.speaker_name == "ana"


@pytest.mark.parametrize("change", ["token", "stale", "no_timestamp"])
def test_mattermost_refusals(change):
    case = _recorded("mattermost_outgoing.json")
    fields, now = dict(case["fields"]), case["fields"]["timestamp"] / 1000
    if change == "token":
        fields["token"] = "wrong"
    elif change == "stale":
        now += 400
    else:
        del fields["timestamp"]
    with pytest.raises(Refused) as refused:
        verify_mattermost(
            case["token"], {"content-type": "application/json"}, json.dumps(fields).encode(), now=now
        )
    assert refused.value.status == 401


def test_an_oversize_body_is_refused_before_any_check(settings):
    settings.ROSTER_WEBHOOK_MAX_BYTES = 100
    channel = Channel(kind="slack")
    with pytest.raises(Refused) as refused:
        verify(channel, "secret", {}, b"x" * 101)
    assert refused.value.status == 413
