"""The vault key: Fernet keys in settings.ROSTER_VAULT_KEY_FILE, outside the database, one a line.

The first line encrypts; every line decrypts (MultiFernet). Normally there is one; during a key rotation
(controlplane/vault/rotation.py) the new key is first and the old ones follow until every secret is
re-encrypted. Created with mode 0600 on first use. A key file that others can read, or that holds
anything but Fernet keys, is refused with a clear error (VaultKeyError) rather than used.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from pathlib import Path

from cryptography.fernet import Fernet, MultiFernet
from django.conf import settings

from controlplane.core.errors import RosterError

_lock = threading.Lock()
_cache: dict[tuple[str, int, int], tuple[MultiFernet, tuple[bytes, ...]]] = {}


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


def key_id(key: bytes) -> str:
    """A name for a key in records and messages: a digest prefix, which tells nothing about the key."""
    return hashlib.sha256(key).hexdigest()[:12]


def _load(path: Path) -> tuple[MultiFernet, tuple[bytes, ...]]:
    st = os.stat(path)  # FileNotFoundError for a missing file: _loaded creates it
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
    keys = tuple(line.strip() for line in path.read_bytes().splitlines() if line.strip())
    try:
        if not keys:
            raise ValueError("no key")
        loaded = (MultiFernet([Fernet(key) for key in keys]), keys)
    except (ValueError, TypeError) as exc:
        raise VaultKeyError(
            f"vault key file {path} does not hold a Fernet key (32 url-safe base64 bytes) on every line"
        ) from exc
    _cache.clear()
    _cache[cache_key] = loaded
    return loaded


def fernet() -> MultiFernet:
    """Encrypts with the key file's first key, decrypts with any of them; creates the file (0600) the
    first time."""
    return _loaded()[0]


def keys() -> tuple[bytes, ...]:
    """The key file's keys, the encrypting one first."""
    return _loaded()[1]


def _loaded() -> tuple[MultiFernet, tuple[bytes, ...]]:
    # Checked on every use (one stat: a rotation in another process shows as a new inode or mtime), and
    # the file created only when that stat finds none.
    path = key_path()
    with _lock:
        try:
            return _load(path)
        except FileNotFoundError:
            _create(path)
            return _load(path)


def write_keys(new_keys: list[bytes]) -> None:
    """Replace the key file with `new_keys` (the encrypting one first) in one step: written beside it
    (0600), flushed, renamed over it and the directory flushed, so a crash leaves the old file or the
    new one, never a part of either. Other processes notice the new file (inode, mtime) on their next
    use."""
    for key in new_keys:
        Fernet(key)  # refuse to write what could not be read back
    path = key_path()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"".join(key + b"\n" for key in new_keys))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    with _lock:
        _cache.clear()
