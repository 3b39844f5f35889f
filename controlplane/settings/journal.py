"""The run journal (controlplane.journal; docs/journal.md)."""

from controlplane.core.env import env
from controlplane.settings.egress import DATA_UPLOAD_MAX_MEMORY_SIZE as _TRACE_UPLOAD

# Each journaled body (a model call's request, its response) is kept up to this many bytes; beyond, it
# is stored truncated and flagged. Sent to the gateway with every allow of a journaled grant (0: the
# journal is off for every grant).
ROSTER_JOURNAL_MAX_BODY_BYTES = env.int("ROSTER_JOURNAL_MAX_BODY_BYTES", 4 * 1024 * 1024, minimum=0)
# Bodies no call has named for this many days are erased by beat (hashes and call rows kept; 0: kept).
ROSTER_JOURNAL_RETENTION_DAYS = env.int("ROSTER_JOURNAL_RETENTION_DAYS", 90, minimum=0)
# POST /api/gateway/journal carries up to 4 calls (the gateway's JOURNAL_BATCH_MAX), each two bodies as
# base64 in JSON: Django must accept that body.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(_TRACE_UPLOAD, 4 * 2 * ROSTER_JOURNAL_MAX_BODY_BYTES * 4 // 3 + 256 * 1024)
