"""Conversations and the relay (controlplane.conversations, controlplane.relay; docs/conversations.md)."""

from controlplane.core.env import env

# An inbound message longer than this is stored cut (and marked so).
ROSTER_CONVERSATION_MESSAGE_MAX_CHARS = env.int("ROSTER_CONVERSATION_MESSAGE_MAX_CHARS", 16000, minimum=1)
# A reply longer than the channel's limit is split into parts; defaults per kind (a channel may set its own).
ROSTER_CHANNEL_MATRIX_MAX_CHARS = env.int("ROSTER_CHANNEL_MATRIX_MAX_CHARS", 4000, minimum=20)
ROSTER_CHANNEL_SLACK_MAX_CHARS = env.int("ROSTER_CHANNEL_SLACK_MAX_CHARS", 3000, minimum=20)
ROSTER_CHANNEL_MATTERMOST_MAX_CHARS = env.int("ROSTER_CHANNEL_MATTERMOST_MAX_CHARS", 4000, minimum=20)
# How long a conversation run may take (seconds) before its box is killed.
ROSTER_CONVERSATION_RUN_TIMEOUT_SECONDS = env.int("ROSTER_CONVERSATION_RUN_TIMEOUT_SECONDS", 600, minimum=1)
# The relay process (python -m controlplane.relay): its HTTP listener (signed webhooks in, /healthz), how
# often it looks for answers to deliver and approvals to post, its reconnect backoff (doubling from this,
# up to the maximum), the Matrix long poll, and how many attempts a reply gets before it is failed.
ROSTER_RELAY_HOST = env.str("ROSTER_RELAY_HOST", "127.0.0.1")
ROSTER_RELAY_PORT = env.int("ROSTER_RELAY_PORT", 8004, minimum=1, maximum=65535)
ROSTER_RELAY_POLL_SECONDS = env.float("ROSTER_RELAY_POLL_SECONDS", 1.0, minimum=0.01)
ROSTER_RELAY_BACKOFF_SECONDS = env.float("ROSTER_RELAY_BACKOFF_SECONDS", 1.0, minimum=0.01)
ROSTER_RELAY_BACKOFF_MAX_SECONDS = env.float("ROSTER_RELAY_BACKOFF_MAX_SECONDS", 60.0, minimum=0.01)
ROSTER_RELAY_SYNC_TIMEOUT_MS = env.int("ROSTER_RELAY_SYNC_TIMEOUT_MS", 10000, minimum=0)
# Events per room per sync; a longer gap (the relay was down) is read back page by page, at most this many.
ROSTER_RELAY_SYNC_TIMELINE_LIMIT = env.int("ROSTER_RELAY_SYNC_TIMELINE_LIMIT", 50, minimum=1)
ROSTER_RELAY_GAP_FILL_MAX_EVENTS = env.int("ROSTER_RELAY_GAP_FILL_MAX_EVENTS", 1000, minimum=1)
ROSTER_RELAY_DELIVERY_MAX_ATTEMPTS = env.int("ROSTER_RELAY_DELIVERY_MAX_ATTEMPTS", 8, minimum=1)
ROSTER_RELAY_HTTP_TIMEOUT_SECONDS = env.float("ROSTER_RELAY_HTTP_TIMEOUT_SECONDS", 15.0, minimum=0.1)
# Signed webhooks in: the largest body accepted, and how far a request's signed time may be from now.
ROSTER_WEBHOOK_MAX_BYTES = env.int("ROSTER_WEBHOOK_MAX_BYTES", 64 * 1024, minimum=1024)
ROSTER_WEBHOOK_REPLAY_SECONDS = env.int("ROSTER_WEBHOOK_REPLAY_SECONDS", 300, minimum=1)
