"""Approvals: held requests, how long they wait, the approvers' comments and mail."""

from controlplane.core.env import env

ROSTER_APPROVAL_TTL_SECONDS = env.int("ROSTER_APPROVAL_TTL_SECONDS", 300, minimum=1)
# How long the gateway holds an asked request before giving up (bounded by the approval TTL). Defined
# here once: every ask answer carries it (hold_seconds), and the gateway's roster_hold_seconds, its own
# ceiling on any hold, must not be below it (the launch scripts pass this same variable to both).
ROSTER_APPROVAL_HOLD_SECONDS = env.int("ROSTER_APPROVAL_HOLD_SECONDS", 60, minimum=0)
ROSTER_APPROVAL_GRACE_SECONDS = env.int("ROSTER_APPROVAL_GRACE_SECONDS", 120, minimum=0)
# The longest single long-poll the gateway may ask for (POST /approvals/{id}/wait); the gateway's
# roster_approval_poll_seconds may be at most this.
ROSTER_APPROVAL_WAIT_MAX_SECONDS = env.float("ROSTER_APPROVAL_WAIT_MAX_SECONDS", 30.0, minimum=1)
# The gateway's wait on a held request is woken by the decision's announcement (approvals group of the
# channel layer) and reads the approval again every RECHECK seconds in case one was lost; every POLL
# seconds while this process is not receiving announcements (Redis down, no channel layer).
ROSTER_APPROVAL_POLL_SECONDS = env.float("ROSTER_APPROVAL_POLL_SECONDS", 0.05, minimum=0)
ROSTER_APPROVAL_RECHECK_SECONDS = env.float("ROSTER_APPROVAL_RECHECK_SECONDS", 1.0, minimum=0)
# An approver's comment with a decision: bounded, and required for a deny when this is on.
ROSTER_APPROVAL_COMMENT_MAX_CHARS = env.int("ROSTER_APPROVAL_COMMENT_MAX_CHARS", 500, minimum=1)
ROSTER_APPROVAL_DENY_COMMENT_REQUIRED = env.bool("ROSTER_APPROVAL_DENY_COMMENT_REQUIRED", False)
# Optional mail to approvers (those with an address) when a request is held; off while the host is empty.
ROSTER_APPROVAL_MAIL_HOST = env.str("ROSTER_APPROVAL_MAIL_HOST", "")
ROSTER_APPROVAL_MAIL_PORT = env.int("ROSTER_APPROVAL_MAIL_PORT", 25, minimum=1, maximum=65535)
ROSTER_APPROVAL_MAIL_FROM = env.str("ROSTER_APPROVAL_MAIL_FROM", "roster@localhost")
ROSTER_APPROVAL_MAIL_TIMEOUT_SECONDS = env.float("ROSTER_APPROVAL_MAIL_TIMEOUT_SECONDS", 10.0, minimum=0)
# Time-boxed approvals: the longest an approver may allow identical requests for (minutes); the queue
# offers 10, 30 and 60 minutes up to this. 0 turns the choice off (every request asks).
ROSTER_APPROVAL_WINDOW_MAX_MINUTES = env.int("ROSTER_APPROVAL_WINDOW_MAX_MINUTES", 60, minimum=0,
                                             maximum=24 * 60)
