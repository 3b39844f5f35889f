"""The vault key: a Fernet key in settings.ROSTER_VAULT_KEY_FILE, outside the database.

Created with mode 0600 on first use. A key file that others can read, or that does not hold a Fernet
key, is refused with a clear error (VaultKeyError) rather than used.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from cryptography.fernet import Fernet
from django.conf import settings

from controlplane.core.errors import RosterError

_lock = threading.Lock()
_cache: dict[tuple[str, int, int], Fernet] = {}


class VaultKeyError(RosterError):
    """The vault key file is unsafe or unusable; the message says which and how to fix it."""


def key_path() -> Path:
    return Path(settings.ROSTER_VAULT_KEY_FILE)


def _create(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another process created it first; it is checked like any existing file
    with os.fdopen(fd, "wb") as fh:
        fh.write(Fernet.generate_key() + b"\n")
        fh.flush()
        os.fsync(fh.fileno())


def check_key_file(path: Path | None = None) -> None:
    """Raise VaultKeyError if the key file exists but is unsafe or malformed (missing is fine)."""
    path = path or key_path()
    if path.exists():
        _load(path)


def _load(path: Path) -> Fernet:
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise VaultKeyError(f"vault key file {path} is not a regular file")
    if st.st_mode & 0o077:
        raise VaultKeyError(
            f"vault key file {path} has mode {stat.S_IMODE(st.st_mode):04o}; other users could read it. "
            f"Run `chmod 600 {path}`."
        )
    cache_key = (str(path), st.st_ino, st.st_mtime_ns)
    cached = _cache.get(cache_key)
    if cached is not None:
        return cached
    raw = path.read_bytes().strip()
    try:
        fernet = Fernet(raw)
    except (ValueError, TypeError) as exc:
        raise VaultKeyError(
            f"vault key file {path} does not hold a Fernet key (32 url-safe base64 bytes)"
        ) from exc
    _cache.clear()
    _cache[cache_key] = fernet
    return fernet


def fernet() -> Fernet:
    """The Fernet for the configured key file, creating the file (0600) the first time."""
    path = key_path()
    with _lock:
        if not path.exists():
            _create(path)
        return _load(path)
