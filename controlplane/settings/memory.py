"""The worker's notes (controlplane.memory; docs/memory.md)."""

from controlplane.core.env import env

# A note's text is at most this long (a note is a fact, not a transcript).
ROSTER_MEMORY_NOTE_MAX_CHARS = env.int("ROSTER_MEMORY_NOTE_MAX_CHARS", 2000, minimum=1)
# Retention per scope, in days (0: kept until forgotten); expired notes are forgotten by beat, audited.
ROSTER_MEMORY_RETENTION_DAYS_PERSON = env.int("ROSTER_MEMORY_RETENTION_DAYS_PERSON", 180, minimum=0)
ROSTER_MEMORY_RETENTION_DAYS_CHANNEL = env.int("ROSTER_MEMORY_RETENTION_DAYS_CHANNEL", 365, minimum=0)
ROSTER_MEMORY_RETENTION_DAYS_WORKER = env.int("ROSTER_MEMORY_RETENTION_DAYS_WORKER", 0, minimum=0)
