"""The SHA-256 of the gateway's service token (and of the metrics scrape token), read when a call is
authenticated rather than once at import.

`make up` mints the token (scripts/gateway-up.sh writes var/gateway/service.token and its hash file); a
process that started before the hash existed, or before the token was replaced, must see the current hash
without a restart, or the decision API answers the gateway's own token with 401 and every egress is
refused. The file is re-read only when its mtime, size or inode changes, so the hot path costs one stat.
An environment value (ROSTER_GATEWAY_TOKEN_SHA256) wins over the file. Anything that is not a SHA-256 in
hex is no hash at all: every call is refused."""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
from pathlib import Path

from django.conf import settings

_HEX_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _valid(value: str) -> str:
    value = value.strip().lower()
    return value if _HEX_SHA256.match(value) else ""


class ConfiguredHash:
    """A token's SHA-256 from a setting's value, or else from the file another setting names, re-read when
    that file changes. Returns "" (refuse every call) when none is configured or it is unreadable."""

    def __init__(self, value_setting: str, file_setting: str) -> None:
        self._value_setting = value_setting
        self._file_setting = file_setting
        self._lock = threading.Lock()
        self._cached: tuple[tuple[str, int, int, int], str] | None = None

    def __call__(self) -> str:
        configured = getattr(settings, self._value_setting, "") or ""
        if configured:
            return _valid(configured)
        path = Path(getattr(settings, self._file_setting, "") or "")
        if str(path) in ("", "."):
            return ""
        try:
            st = path.stat()
        except OSError:
            return ""
        key = (str(path), st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._cached
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            value = _valid(path.read_text())
        except (OSError, UnicodeDecodeError):
            return ""
        with self._lock:
            self._cached = (key, value)
        return value


# The gateway's service token: the only bearer the decision API answers.
gateway_token_sha256 = ConfiguredHash("ROSTER_GATEWAY_TOKEN_SHA256", "ROSTER_GATEWAY_TOKEN_SHA256_FILE")

# The scrape token of the control plane's metrics listener (controlplane.metrics.listener): read-only
# access to metrics, never to decisions, so a Prometheus holding it cannot act as the gateway.
metrics_token_sha256 = ConfiguredHash("ROSTER_METRICS_TOKEN_SHA256", "ROSTER_METRICS_TOKEN_SHA256_FILE")


def is_gateway_token(token: str) -> bool:
    """The bearer's SHA-256 equals the configured hash, compared in constant time; no hash configured
    means no token is the gateway's."""
    expected = gateway_token_sha256()
    if not expected or not token:
        return False
    offered = hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
    return hmac.compare_digest(offered, expected)
