"""The audit chain: how export and verify read it."""

from controlplane.core.env import env
from controlplane.settings.base import VAR_DIR

# Audit export / verify read the chain in chunks of this many records (constant memory).
ROSTER_AUDIT_CHUNK_SIZE = env.int("ROSTER_AUDIT_CHUNK_SIZE", 2000, minimum=1)
# Verify splits a long chain into seq ranges checked by this many worker processes (0: one per usable
# CPU; 1: always in-process). Below the minimum length, starting processes costs more than it saves.
ROSTER_AUDIT_VERIFY_WORKERS = env.int("ROSTER_AUDIT_VERIFY_WORKERS", 0, minimum=0)
ROSTER_AUDIT_VERIFY_PARALLEL_MIN_RECORDS = env.int("ROSTER_AUDIT_VERIFY_PARALLEL_MIN_RECORDS", 50_000,
                                                   minimum=0)
# Signed checkpoints (docs/audit.md): the Ed25519 signing key (0600, outside the database; its public
# keys beside it as <file>.pub), the checkpoint log (append-only JSON lines, outside the database) and
# how often Celery beat makes one.
ROSTER_AUDIT_CHECKPOINT_KEY_FILE = env.path("ROSTER_AUDIT_CHECKPOINT_KEY_FILE",
                                            VAR_DIR / "audit-checkpoint.key")
ROSTER_AUDIT_CHECKPOINT_LOG = env.path("ROSTER_AUDIT_CHECKPOINT_LOG", VAR_DIR / "audit-checkpoints.jsonl")
ROSTER_AUDIT_CHECKPOINT_SECONDS = env.float("ROSTER_AUDIT_CHECKPOINT_SECONDS", 3600.0, minimum=1)
