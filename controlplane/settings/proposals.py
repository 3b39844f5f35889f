"""Proposals: what a box asks the trusted side to do (docs/proposals.md), and the executors."""

from controlplane.core.env import env

# The reserved name the gateway answers itself for proposals (".invalid" can never be a real host). Boxes
# are told it (ROSTER_AGENT_PROPOSALS_URL); the gateway's roster_proposals_host must be the same name (the
# launch scripts pass this same variable to both, and the gateway checks it against the health answer).
ROSTER_PROPOSALS_HOST = env.str("ROSTER_PROPOSALS_HOST", "proposals.roster.invalid")
if not ROSTER_PROPOSALS_HOST.endswith(".invalid") or ROSTER_PROPOSALS_HOST == ".invalid":
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("ROSTER_PROPOSALS_HOST must be a name under .invalid (RFC 6761: never a real "
                               f"host), not {ROSTER_PROPOSALS_HOST!r}")
# A pending proposal nobody decided by then expires (never refused: expiry is not a human's no).
ROSTER_PROPOSAL_TTL_SECONDS = env.int("ROSTER_PROPOSAL_TTL_SECONDS", 24 * 3600, minimum=1)
# Largest proposal body the box may send (JSON as received); bigger is 413, nothing recorded.
ROSTER_PROPOSAL_MAX_BYTES = env.int("ROSTER_PROPOSAL_MAX_BYTES", 2 * 1024 * 1024, minimum=1)
# E-mail: total decoded attachment bytes and how many; body and subject limits.
ROSTER_PROPOSAL_MAX_ATTACHMENT_BYTES = env.int("ROSTER_PROPOSAL_MAX_ATTACHMENT_BYTES", 1024 * 1024, minimum=0)
ROSTER_PROPOSAL_MAX_ATTACHMENTS = env.int("ROSTER_PROPOSAL_MAX_ATTACHMENTS", 10, minimum=0)
ROSTER_PROPOSAL_MAX_RECIPIENTS = env.int("ROSTER_PROPOSAL_MAX_RECIPIENTS", 20, minimum=1)
ROSTER_PROPOSAL_MAX_TEXT_BYTES = env.int("ROSTER_PROPOSAL_MAX_TEXT_BYTES", 256 * 1024, minimum=1)
# How many of the run's received results a proposal records as "what the run saw".
ROSTER_PROPOSAL_SEEN_MAX = env.int("ROSTER_PROPOSAL_SEEN_MAX", 50, minimum=0)
# Executors: attempts on a transient failure (server down, timeout, 5xx / 4xx SMTP), backoff between them.
ROSTER_EXECUTOR_MAX_ATTEMPTS = env.int("ROSTER_EXECUTOR_MAX_ATTEMPTS", 3, minimum=1)
ROSTER_EXECUTOR_RETRY_SECONDS = env.float("ROSTER_EXECUTOR_RETRY_SECONDS", 10.0, minimum=0)
ROSTER_EXECUTOR_TIMEOUT_SECONDS = env.float("ROSTER_EXECUTOR_TIMEOUT_SECONDS", 20.0, minimum=0)
# How much of a remote's answer is kept on the proposal (its status line, the start of its body).
ROSTER_EXECUTOR_ANSWER_CHARS = env.int("ROSTER_EXECUTOR_ANSWER_CHARS", 500, minimum=0)
