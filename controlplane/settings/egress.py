"""Egress: the decision API the gateway calls (docs/wire.md), its process, its metrics listener.

Several limits here have a counterpart among the gateway's options (gateway/roster_gateway/options.py):
the gateway must never send more than the decision API accepts. The decision API's health answer
carries these (controlplane.egress.limits), and the gateway compares its own with them when it starts
and on every health probe (docs/settings.md, "Settings the gateway and the control plane share")."""

import os

from controlplane.core.env import env
from controlplane.settings.base import VAR_DIR

# The gateway's service credential: the control plane keeps only its SHA-256 (hex), from the environment
# or from this file, which `make up` writes next to the gateway's own copy of the raw token.
ROSTER_GATEWAY_TOKEN_SHA256_FILE = env.path("ROSTER_GATEWAY_TOKEN_SHA256_FILE",
                                            VAR_DIR / "gateway-token.sha256")
# When set, wins over the file; otherwise the file is read when a call is authenticated (cached by mtime),
# never at import: see controlplane.core.service_token.
ROSTER_GATEWAY_TOKEN_SHA256 = env.str("ROSTER_GATEWAY_TOKEN_SHA256", "")
# The decision API's own process (python -m controlplane.decision_server; scripts/up.sh), which the gateway
# calls. Loopback only. Idle keep-alive connections from the gateway are kept this long.
ROSTER_DECISION_API_HOST = env.str("ROSTER_DECISION_API_HOST", "127.0.0.1")
ROSTER_DECISION_API_PORT = env.int("ROSTER_DECISION_API_PORT", 8002, minimum=1, maximum=65535)
ROSTER_DECISION_API_KEEPALIVE_SECONDS = env.int("ROSTER_DECISION_API_KEEPALIVE_SECONDS", 75, minimum=1)
# How many processes serve the decision API (`--processes` overrides it): uvicorn binds the port once and
# its worker processes share the socket; they share one audit chain and one ledger through the database's
# lock (docs/operations.md, "Decision API processes"). Default: one per core; 1 is a single process.
ROSTER_DECISION_PROCESSES = env.int("ROSTER_DECISION_PROCESSES", os.cpu_count() or 1, minimum=1, maximum=256)
# The decision API process's Prometheus metrics (controlplane.metrics; docs/operations.md, Metrics): a
# listener of its own, apart from the decision API's port, on loopback unless the operator says otherwise,
# answering only a bearer whose SHA-256 matches (scripts/mint-secrets.sh makes var/metrics.token and
# var/metrics-token.sha256). Port 0: no listener (`make up` turns it on, port 8003).
ROSTER_METRICS_HOST = env.str("ROSTER_METRICS_HOST", "127.0.0.1")
ROSTER_METRICS_PORT = env.int("ROSTER_METRICS_PORT", 0, minimum=0, maximum=65535)
ROSTER_METRICS_TOKEN_SHA256_FILE = env.path("ROSTER_METRICS_TOKEN_SHA256_FILE",
                                            VAR_DIR / "metrics-token.sha256")
ROSTER_METRICS_TOKEN_SHA256 = env.str("ROSTER_METRICS_TOKEN_SHA256", "")
# Celery queues whose length (the broker's Redis list) the metrics report.
ROSTER_METRICS_CELERY_QUEUES = env.list("ROSTER_METRICS_CELERY_QUEUES", ["celery"])
# Longest wait for the broker when the metrics read its queue lengths (a scrape never hangs on Redis).
ROSTER_METRICS_BROKER_TIMEOUT_SECONDS = env.float("ROSTER_METRICS_BROKER_TIMEOUT_SECONDS", 1.0, minimum=0)
# At most this many decisions and outcome batches that arrive together share one transaction and one
# commit on the gateway API's database thread (controlplane.egress.db_thread; 1 turns grouping off).
ROSTER_GROUP_COMMIT_MAX = env.int("ROSTER_GROUP_COMMIT_MAX", 64, minimum=1)
# Decision API input limits (the gateway's request facts; anything bigger is a 422, nothing decided). The
# gateway refuses bigger requests itself first, legibly (its roster_max_headers, roster_max_header_bytes,
# roster_max_target_bytes, roster_body_preview_bytes may be at most these).
ROSTER_DECIDE_MAX_HEADERS = env.int("ROSTER_DECIDE_MAX_HEADERS", 200, minimum=1)
ROSTER_DECIDE_MAX_HEADER_BYTES = env.int("ROSTER_DECIDE_MAX_HEADER_BYTES", 16 * 1024, minimum=1)
ROSTER_DECIDE_MAX_PATH_BYTES = env.int("ROSTER_DECIDE_MAX_PATH_BYTES", 16 * 1024, minimum=1)
ROSTER_DECIDE_MAX_MCP_CALLS = env.int("ROSTER_DECIDE_MAX_MCP_CALLS", 100, minimum=1)
ROSTER_BODY_PREVIEW_BYTES = env.int("ROSTER_BODY_PREVIEW_BYTES", 4096, minimum=0)
# POST /api/gateway/outcomes: the most outcome reports the gateway may settle in one call (one transaction);
# the gateway's roster_outcome_batch_max may be at most this, or its batches would be refused unsettled.
ROSTER_OUTCOME_BATCH_MAX = env.int("ROSTER_OUTCOME_BATCH_MAX", 256, minimum=1)
ROSTER_TRACE_MAX_BYTES = env.int("ROSTER_TRACE_MAX_BYTES", 8 * 1024 * 1024, minimum=0)
# /api/gateway/trace carries up to ROSTER_TRACE_MAX_BYTES as base64 in JSON; Django must accept that body.
DATA_UPLOAD_MAX_MEMORY_SIZE = ROSTER_TRACE_MAX_BYTES * 4 // 3 + 64 * 1024
