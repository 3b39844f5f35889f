from __future__ import annotations

import pytest

from controlplane.vault import keyfile, services


@pytest.fixture(autouse=True)
def vault_key(settings, tmp_path):
    """Each test gets its own key file (created 0600 on first use) and a fresh sentinel index."""
    settings.ROSTER_VAULT_KEY_FILE = tmp_path / "keys" / "vault.key"
    keyfile._cache.clear()
    services.invalidate_sentinel_cache()
    yield settings.ROSTER_VAULT_KEY_FILE
    keyfile._cache.clear()
    services.invalidate_sentinel_cache()


# A value that would be noticed anywhere it leaked, in plain text or in common encodings.
VALUE = "real-credential-Zq8vP3kL0xW9mN4t"
