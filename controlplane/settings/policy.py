"""Policy: grants and their files (docs/grants.md)."""

from controlplane.core.env import env

# Compiled grant rules kept in memory, keyed on the grant row's every column (rows are always re-read).
ROSTER_GRANT_RULE_CACHE_SIZE = env.int("ROSTER_GRANT_RULE_CACHE_SIZE", 10_000, minimum=0)
# A grant file is a few lines; anything larger is refused by `grants check/import`.
ROSTER_GRANT_FILE_MAX_BYTES = env.int("ROSTER_GRANT_FILE_MAX_BYTES", 64 * 1024, minimum=1)
