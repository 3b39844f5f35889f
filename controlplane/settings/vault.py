"""The vault: secrets encrypted at rest, their sentinels (docs/vault.md)."""

from controlplane.core.env import env
from controlplane.settings.base import VAR_DIR

# The vault key lives outside the database, in a file only the control plane reads (mode 0600).
ROSTER_VAULT_KEY_FILE = env.path("ROSTER_VAULT_KEY_FILE", VAR_DIR / "vault.key")
# How long a process trusts its sentinel index before checking whether another process changed secrets.
ROSTER_VAULT_SENTINEL_CACHE_SECONDS = env.float("ROSTER_VAULT_SENTINEL_CACHE_SECONDS", 2.0, minimum=0)
# Largest secret value accepted (bytes); headers larger than this are not credentials.
ROSTER_VAULT_MAX_VALUE_BYTES = env.int("ROSTER_VAULT_MAX_VALUE_BYTES", 8192, minimum=1)
