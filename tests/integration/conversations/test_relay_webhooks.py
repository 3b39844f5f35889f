"""Webhook channels through the real relay process: a signed Slack request and a Mattermost outgoing
webhook become messages and runs; a bad signature, a replay, a bad token and an oversize body are refused
with nothing stored; the run's answer is posted to the channel's reply URL by the trusted side."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from controlplane.audit.models import AuditRecord
from controlplane.conversations.models import Channel, Delivery, Message
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_set_status, worker_create
from controlplane.relay.webhooks import slack_signature
from controlplane.vault.services import secret_set
from tests.integration.conversations.conftest import wait_until

pytestmark = [pytest.mark.integration]
SLACK_SECRET = "e6b19c573432dcc6b075501d51b51bb8"
MM_TOKEN = "uzbeakfj4jbcdqw8pw3sqbho9r"


@pytest.fixture
def receiver():
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            received.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/incoming/T0/B0/xyz", received
    server.shutdown()


@pytest.fixture
def channels(relay_env, receiver):
    worker = worker_create("helpdesk")
    url, _ = receiver
    slack = Channel.objects.create(
        name="slack-help",
        kind="slack",
        worker=worker,
        signing_secret=secret_set("slack-signing", SLACK_SECRET),
        reply_url=secret_set("slack-reply", url),
    )
    mattermost = Channel.objects.create(
        name="mm-help",
        kind="mattermost",
        worker=worker,
        signing_secret=secret_set("mm-token", MM_TOKEN),
        reply_url=secret_set("mm-reply", url),
    )
    return slack, mattermost


def _slack(body: dict, *, at: float | None = None, secret: str = SLACK_SECRET) -> tuple[dict, bytes]:
    raw = json.dumps(body).encode()
    ts = str(int(at if at is not None else time.time()))
    return {
        "x-slack-request-timestamp": ts,
        "x-slack-signature": slack_signature(secret, ts, raw),
        "content-type": "application/json",
    }, raw


def _event(event_id: str, text: str) -> dict:
    return {
        "type": "event_callback",
        "event_id": event_id,
        "event": {"type": "message", "user": "U061F7AUR", "text": text, "ts": f"{time.time():.6f}"},
    }


def _nothing_changed(before: tuple[int, int, int]) -> bool:
    return (Message.objects.count(), Run.objects.count(), AuditRecord.objects.count()) == before


def test_signed_requests_become_messages_and_bad_ones_store_nothing(channels, relay, receiver):
    slack, mattermost = channels
    relay.start()
    hook = relay.url + "/hooks/"
    before = (Message.objects.count(), Run.objects.count(), AuditRecord.objects.count())
    headers, raw = _slack(_event("Ev1", "bad signature"), secret="not-the-secret")
    assert httpx.post(hook + slack.name, content=raw, headers=headers).status_code == 401
    headers, raw = _slack(_event("Ev2", "replayed"), at=time.time() - 3600)
    assert httpx.post(hook + slack.name, content=raw, headers=headers).status_code == 401
    headers, raw = _slack(_event("Ev3", "x" * 70_000))
    assert httpx.post(hook + slack.name, content=raw, headers=headers).status_code == 413
    tampered_headers, raw = _slack(_event("Ev4", "original"))
    tampered = raw.replace(b"original", b"tampered")
    assert httpx.post(hook + slack.name, content=tampered, headers=tampered_headers).status_code == 401
    wrong = {
        "token": "guess",
        "timestamp": int(time.time() * 1000),
        "post_id": "p0",
        "user_id": "u0",
        "text": "hi",
    }
    assert httpx.post(hook + mattermost.name, json=wrong).status_code == 401
    assert httpx.post(hook + "no-such-channel", json=wrong).status_code == 404
    assert _nothing_changed(before)

    headers, raw = _slack(_event("Ev5", "Is the deploy green?"))
    assert httpx.post(hook + slack.name, content=raw, headers=headers).status_code == 200
    # Slack retries an event under the same id: stored once.
    assert httpx.post(hook + slack.name, content=raw, headers=headers).status_code == 200
    good = {
        "token": MM_TOKEN,
        "timestamp": int(time.time() * 1000),
        "post_id": "p1",
        "user_id": "u1",
        "user_name": "ana",
        "text": "and the queue?",
    }
    assert httpx.post(hook + mattermost.name, data=good).status_code == 200
    slack_message = Message.objects.get(channel=slack)
    assert slack_message.external_id == "Ev5" and slack_message.text == "Is the deploy green?"
    assert Message.objects.get(channel=mattermost).speaker_name == "ana"
    # The run's answer goes to the channel's reply URL, from the trusted side.
    run = slack_message.run
    run_set_status(run.pk, Run.Status.RUNNING)
    run_set_status(run.pk, Run.Status.SUCCEEDED, answer="Green.", exit_code=0)
    _, received = receiver
    wait_until(
        lambda: Delivery.objects.filter(run=run, status="sent").exists(), what="delivered", relay=relay
    )
    assert received == [{"text": "Green."}]


def test_the_url_verification_handshake_is_answered(channels, relay):
    slack, _ = channels
    relay.start()
    headers, raw = _slack({"type": "url_verification", "challenge": "c-123"})
    answer = httpx.post(relay.url + "/hooks/" + slack.name, content=raw, headers=headers)
    assert answer.status_code == 200 and answer.json() == {"challenge": "c-123"}
    assert not Message.objects.exists()
