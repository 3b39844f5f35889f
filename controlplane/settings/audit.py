"""The audit chain: how export and verify read it."""

from controlplane.core.env import env

# Audit export / verify read the chain in chunks of this many records (constant memory).
ROSTER_AUDIT_CHUNK_SIZE = env.int("ROSTER_AUDIT_CHUNK_SIZE", 2000, minimum=1)
# Verify splits a long chain into seq ranges checked by this many worker processes (0: one per usable
# CPU; 1: always in-process). Below the minimum length, starting processes costs more than it saves.
ROSTER_AUDIT_VERIFY_WORKERS = env.int("ROSTER_AUDIT_VERIFY_WORKERS", 0, minimum=0)
ROSTER_AUDIT_VERIFY_PARALLEL_MIN_RECORDS = env.int("ROSTER_AUDIT_VERIFY_PARALLEL_MIN_RECORDS", 50_000,
                                                   minimum=0)
