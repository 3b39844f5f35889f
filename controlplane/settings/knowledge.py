"""The worker's world store (controlplane.knowledge; docs/knowledge.md)."""

from controlplane.core.env import env
from controlplane.settings.base import VAR_DIR

# One bare Git repository per worker, <dir>/<worker>.git, on the trusted side only (no box mounts it).
ROSTER_KNOWLEDGE_DIR = env.path("ROSTER_KNOWLEDGE_DIR", VAR_DIR / "knowledge")
# Limits a run's change must fit before it is proposed, and again before it is committed.
ROSTER_KNOWLEDGE_FILE_MAX_BYTES = env.int("ROSTER_KNOWLEDGE_FILE_MAX_BYTES", 262144, minimum=1)
ROSTER_KNOWLEDGE_CHANGE_MAX_BYTES = env.int("ROSTER_KNOWLEDGE_CHANGE_MAX_BYTES", 1048576, minimum=1)
ROSTER_KNOWLEDGE_CHANGE_MAX_FILES = env.int("ROSTER_KNOWLEDGE_CHANGE_MAX_FILES", 200, minimum=1)
# Binary files (not UTF-8 text, or holding a NUL byte) are refused unless this is on.
ROSTER_KNOWLEDGE_ALLOW_BINARY = env.bool("ROSTER_KNOWLEDGE_ALLOW_BINARY", False)
