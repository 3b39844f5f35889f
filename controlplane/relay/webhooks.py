"""Signed webhooks in (Slack's Events API, Mattermost's outgoing webhooks), checked by their documented
rules before anything is read as a message; a request that fails a check is refused and nothing is
stored. Replies go out to the channel's incoming-webhook URL (a vault secret) from the trusted side.

- Slack: `X-Slack-Signature: v0=<hex>` is HMAC-SHA256, keyed with the app's signing secret, over
  `v0:<X-Slack-Request-Timestamp>:<raw body>`; a timestamp further than ROSTER_WEBHOOK_REPLAY_SECONDS from
  now is a replay. `url_verification` is answered with its challenge; `event_callback` of type `message`
  (no subtype, no bot) is a message, its `event_id` its id (Slack retries one event under the same id).
- Mattermost: outgoing webhooks are not signed; each carries the webhook's `token` (checked in constant
  time against the channel's secret), its `timestamp` in ms (the same replay window) and the `post_id`
  (its id). JSON or form-encoded.
A body over ROSTER_WEBHOOK_MAX_BYTES is refused unread."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qs

from django.conf import settings

from controlplane.conversations.models import Channel
from controlplane.conversations.services import Inbound
from controlplane.core.errors import RosterError


class Refused(RosterError):
    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class Verified:
    inbound: Inbound | None  # None: a valid request that carries no message (a bot's post, a handshake)
    answer: dict  # what to answer the sender (Slack's challenge)


def slack_signature(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def _fresh(seconds: float, now: float) -> None:
    if abs(now - seconds) > settings.ROSTER_WEBHOOK_REPLAY_SECONDS:
        raise Refused(401, "replayed or stale: the signed time is outside the replay window")


def _json(body: bytes) -> dict:
    try:
        doc = json.loads(body)
    except ValueError:
        raise Refused(400, "the body is not JSON") from None
    if not isinstance(doc, dict):
        raise Refused(400, "the body is not a JSON object")
    return doc


def verify_slack(secret: str, headers: dict[str, str], body: bytes, now: float | None = None) -> Verified:
    now = time.time() if now is None else now
    timestamp = headers.get("x-slack-request-timestamp", "")
    signature = headers.get("x-slack-signature", "")
    if not timestamp.isdigit() or not signature:
        raise Refused(401, "missing Slack signature headers")
    if not hmac.compare_digest(slack_signature(secret, timestamp, body), signature):
        raise Refused(401, "bad signature")
    _fresh(int(timestamp), now)
    doc = _json(body)
    if doc.get("type") == "url_verification":
        return Verified(None, {"challenge": str(doc.get("challenge", ""))[:200]})
    event = doc.get("event") if isinstance(doc.get("event"), dict) else {}
    if (
        doc.get("type") != "event_callback"
        or event.get("type") != "message"
        or event.get("subtype")
        or event.get("bot_id")
        or not isinstance(event.get("text"), str)
    ):
        return Verified(None, {"ok": True})
    event_id = doc.get("event_id") or event.get("client_msg_id") or event.get("ts")
    user = event.get("user")
    if not isinstance(event_id, str) or not isinstance(user, str):
        raise Refused(400, "a message event without its id or user")
    sent = datetime.fromtimestamp(float(event.get("ts") or doc.get("event_time") or now), tz=UTC)
    return Verified(
        Inbound(external_id=event_id, speaker_id=user, speaker_name=user, sent_at=sent, text=event["text"]),
        {"ok": True},
    )


def _mattermost_fields(headers: dict[str, str], body: bytes) -> dict:
    if headers.get("content-type", "").split(";")[0].strip() == "application/x-www-form-urlencoded":
        try:
            return {k: v[0] for k, v in parse_qs(body.decode("utf-8"), strict_parsing=False).items()}
        except UnicodeDecodeError:
            raise Refused(400, "the form is not UTF-8") from None
    return _json(body)


def verify_mattermost(
    secret: str, headers: dict[str, str], body: bytes, now: float | None = None
) -> Verified:
    now = time.time() if now is None else now
    fields = _mattermost_fields(headers, body)
    token = fields.get("token")
    if not isinstance(token, str) or not hmac.compare_digest(token.encode(), secret.encode()):
        raise Refused(401, "bad token")
    try:
        millis = int(fields.get("timestamp"))
    except (TypeError, ValueError):
        raise Refused(401, "missing timestamp") from None
    _fresh(millis / 1000, now)
    post_id, user_id, text = fields.get("post_id"), fields.get("user_id"), fields.get("text")
    if not all(isinstance(v, str) and v for v in (post_id, user_id)) or not isinstance(text, str):
        raise Refused(400, "a post without its id, user or text")
    name = fields.get("user_name") if isinstance(fields.get("user_name"), str) else user_id
    return Verified(
        Inbound(
            external_id=post_id,
            speaker_id=user_id,
            speaker_name=name,
            sent_at=datetime.fromtimestamp(millis / 1000, tz=UTC),
            text=text,
        ),
        {},
    )


VERIFIERS = {Channel.Kind.SLACK: verify_slack, Channel.Kind.MATTERMOST: verify_mattermost}


def verify(channel: Channel, secret: str, headers: dict[str, str], body: bytes) -> Verified:
    if len(body) > settings.ROSTER_WEBHOOK_MAX_BYTES:
        raise Refused(413, "too large")
    verifier = VERIFIERS.get(channel.kind)
    if verifier is None:
        raise Refused(404, "no such webhook channel")
    return verifier(secret, headers, body)
