"""Vault key rotation (`manage.py secret rotate-key`): every secret re-encrypted under a new key, the old
key kept readable until that is done, each step on the audit record.

1. Every secret must decrypt with the key file as it is; otherwise nothing changes (a rotation would
   otherwise bury a damaged secret under a key that cannot read it either).
2. The key file becomes [new, old, …] (one atomic rename): from here every process encrypts with the new
   key and still reads the old. Audited `vault_key` action `rotation_started`.
3. Each secret is re-encrypted under the new key, one row at a time under its row lock.
4. Every secret is read back with the new key alone; any written meanwhile under an old key is
   re-encrypted again. Only then is the key file rewritten as [new]. Audited `rotation_finished`.

A rotation stopped anywhere (killed, the database gone) leaves every secret readable: before step 2 with
the old key file, after it with both keys. Running `rotate-key` again finishes the rotation in progress
(the key file holding more than one key) instead of starting another. Two rotations never run at once (a
lock file beside the key file). No value is printed, logged or recorded; keys appear only by key id."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken
from django.db import transaction

from controlplane.audit.services import audit_append
from controlplane.core.errors import RosterError
from controlplane.vault import keyfile
from controlplane.vault.models import Secret

_READ_BACK_PASSES = 3


class RotationError(RosterError):
    """The rotation cannot start or finish; the message names secrets and keys by name and id only."""


@dataclass(frozen=True)
class RotationResult:
    new_key_id: str
    retired_key_ids: tuple[str, ...]
    reencrypted: int
    resumed: bool


@contextlib.contextmanager
def _rotation_lock() -> Iterator[None]:
    path = keyfile.key_path().with_name(keyfile.key_path().name + ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RotationError(f"another key rotation holds {path}; wait for it to finish") from None
        yield
    finally:
        os.close(fd)


def _unreadable(names_and_ciphertexts, decrypt: Callable[[bytes], bytes]) -> list[str]:
    bad = []
    for name, ciphertext in names_and_ciphertexts:
        try:
            decrypt(bytes(ciphertext))
        except InvalidToken:
            bad.append(name)
    return bad


def _reencrypt_one(secret_id: int) -> bool:
    """Re-encrypt one secret under the key file's first key; False if it was deleted meanwhile."""
    current = keyfile.fernet()
    with transaction.atomic():
        row = Secret.objects.select_for_update().filter(pk=secret_id).values_list("ciphertext").first()
        if row is None:
            return False
        # QuerySet.update: the ciphertext changes, the secret (value, kind, sentinel) does not.
        Secret.objects.filter(pk=secret_id).update(ciphertext=current.rotate(bytes(row[0])))
    return True


def rotate_key(*, by: str = "cli") -> RotationResult:
    with _rotation_lock():
        keys = keyfile.keys()
        every = list(Secret.objects.order_by("name").values_list("name", "ciphertext"))
        bad = _unreadable(every, keyfile.fernet().decrypt)
        if bad:
            raise RotationError(
                f"{len(bad)} secret(s) cannot be decrypted with the key file {keyfile.key_path()} "
                f"({', '.join(bad[:10])}); nothing was changed. Restore the key that encrypted them, or "
                "set those secrets again, then rotate")
        resumed = len(keys) > 1
        if resumed:
            new_key, old_keys = keys[0], list(keys[1:])
        else:
            new_key, old_keys = Fernet.generate_key(), list(keys)
            keyfile.write_keys([new_key, *old_keys])
        retired = tuple(keyfile.key_id(k) for k in old_keys)
        audit_append("vault_key", {"action": "rotation_resumed" if resumed else "rotation_started",
                                   "new_key": keyfile.key_id(new_key), "old_keys": list(retired),
                                   "secrets": len(every), "by": by})
        count = 0
        for secret_id in Secret.objects.order_by("pk").values_list("pk", flat=True):
            count += _reencrypt_one(secret_id)
        _read_back_under(new_key)
        keyfile.write_keys([new_key])
        audit_append("vault_key", {"action": "rotation_finished", "new_key": keyfile.key_id(new_key),
                                   "retired_keys": list(retired), "reencrypted": count, "by": by})
        return RotationResult(keyfile.key_id(new_key), retired, count, resumed)


def _read_back_under(new_key: bytes) -> None:
    """Every secret decrypts with the new key alone; one stored meanwhile by a process that still held the
    old key file is re-encrypted again. The old keys are dropped only after this."""
    only_new = Fernet(new_key)
    for _ in range(_READ_BACK_PASSES):
        stragglers = [
            pk for pk, name, ciphertext in Secret.objects.values_list("pk", "name", "ciphertext")
            if _unreadable([(name, ciphertext)], only_new.decrypt)]
        if not stragglers:
            return
        for pk in stragglers:
            _reencrypt_one(pk)
    raise RotationError("secrets keep being written under an old key; the key file keeps both keys "
                        "(every secret stays readable). Run `secret rotate-key` again to finish")
