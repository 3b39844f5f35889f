from __future__ import annotations

import pytest

from controlplane.fleet.services import worker_create
from controlplane.vault import keyfile, services


@pytest.fixture(autouse=True)
def vault_key(settings, tmp_path):
    """Each test gets its own vault key (presets and workers' environments are checked against the
    vault's values) and a fresh sentinel index."""
    settings.ROSTER_VAULT_KEY_FILE = tmp_path / "keys" / "vault.key"
    keyfile._cache.clear()
    services.invalidate_sentinel_cache()
    yield settings.ROSTER_VAULT_KEY_FILE
    keyfile._cache.clear()
    services.invalidate_sentinel_cache()


@pytest.fixture
def worker(db):
    return worker_create("agent-worker")


def preset_data(**overrides) -> dict:
    """A valid third-party preset in file form (the shape of workers/presets/<slug>/preset.toml)."""
    data = {
        "slug": "pi", "title": "pi coding agent", "image": "roster-box-pi:{box_tag}",
        "build": "workers/presets/pi/build.sh", "wire": "openai-chat",
        "command": ["pi", "-p", "--model", "{model}", "{prompt}"], "answer": "stdout",
        "key_variable": "OPENAI_API_KEY", "default_model": "gpt-4o-mini",
        "default_base_url": "https://api.openai.com/v1",
        "env": {"PI_OFFLINE": "1", "PI_BASE": "{base_url}"},
        "files": [{"path": ".pi/agent/models.json", "mode": "copy",
                   "content": '{"providers": {"roster": {"baseUrl": "{base_url}", "apiKey": "{env:X}"}}}'}],
        "suggested_grant": {"paths": ["{base_path}/chat/completions"], "methods": ["POST"],
                            "inject_header": "authorization", "inject_format": "Bearer {secret}",
                            "trace": True},
    }
    data.update(overrides)
    return data
