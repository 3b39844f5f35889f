"""The vault's services. A secret's value is accepted here, encrypted at once, and leaves only through
`secret_reveal` (the decision path). It is never logged, audited, echoed or put in an error."""

from __future__ import annotations

import base64
import re
import threading
import time
from collections.abc import Iterable, Sequence

from cryptography.fernet import InvalidToken
from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, Max
from django.db.models.signals import post_delete, post_save

from controlplane.audit.edits import MASKED
from controlplane.audit.services import audit_append
from controlplane.core.errors import RosterError, ValidationFailed
from controlplane.vault import keyfile
from controlplane.vault.models import Secret
from controlplane.vault.sentinels import make_sentinel

_SENTINEL_RETRIES = 5
_BASIC_RE = re.compile(r"basic\s+([A-Za-z0-9+/=_-]{8,})", re.IGNORECASE)


class VaultError(RosterError):
    """A secret cannot be decrypted or stored; the message never contains a value."""


def validate_secret_value(value: object) -> str:
    if not isinstance(value, str) or value == "":
        raise ValidationFailed({"value": "a secret value must be a non-empty string"})
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        # CR/LF would let a value inject extra headers when the gateway sets it.
        raise ValidationFailed({"value": "a secret value must not contain control characters or newlines"})
    if len(value.encode()) > settings.ROSTER_VAULT_MAX_VALUE_BYTES:
        limit = settings.ROSTER_VAULT_MAX_VALUE_BYTES
        raise ValidationFailed({"value": f"a secret value is limited to {limit} bytes"})
    return value


def _edit(secret: Secret | None, kind: str, value: str) -> tuple[dict | None, dict, list[str]]:
    """The record's before, after and changed (docs/audit.md, admin edits): the kind, and the value only
    as "[masked]", named in `changed` when it differs from the stored one (decrypted here, compared and
    dropped; one that cannot be decrypted counts as changed)."""
    after = {"kind": kind, "value": MASKED}
    if secret is None:
        return None, after, ["kind", "value"]
    try:
        same = keyfile.fernet().decrypt(bytes(secret.ciphertext)).decode() == value
    except InvalidToken:
        same = False
    changed = [k for k, differs in (("kind", secret.kind != kind), ("value", not same)) if differs]
    return {"kind": secret.kind, "value": MASKED}, after, changed


def secret_set(name: str, value: str, kind: str = "generic", *, by: str = "", via: str = "") -> Secret:
    """Create or replace a secret. A new kind gets a new sentinel; the same kind keeps its sentinel so
    boxes configured with it keep working. Audited "secret_change" with the name and kind, who (`by`,
    `via`) and what changed, the value only as "[masked]"."""
    value = validate_secret_value(value)
    if kind not in Secret.Kind.values:
        known = ", ".join(Secret.Kind.values)
        raise ValidationFailed({"kind": f"unknown kind {kind!r}; expected one of {known}"})
    ciphertext = keyfile.fernet().encrypt(value.encode())
    for _attempt in range(_SENTINEL_RETRIES):
        try:
            with transaction.atomic():
                secret = Secret.objects.select_for_update().filter(name=name).first()
                action = "updated" if secret else "created"
                before, after, changed = _edit(secret, kind, value)
                if secret is None:
                    secret = Secret(name=name)
                if secret.sentinel == "" or secret.kind != kind:
                    secret.sentinel = make_sentinel(kind)
                secret.kind = kind
                secret.ciphertext = ciphertext
                try:
                    secret.full_clean(exclude=["ciphertext"])
                except DjangoValidationError as exc:
                    raise ValidationFailed({f: "; ".join(m) for f, m in exc.message_dict.items()}) from None
                secret.save()
                audit_append("secret_change", {"name": secret.name, "kind": kind, "action": action, "by": by,
                                               "via": via, "before": before, "after": after,
                                               "changed": changed})
            invalidate_sentinel_cache()
            return secret
        except IntegrityError:
            continue  # a sentinel collision (astronomically rare) or a concurrent create; try again
    raise VaultError(f"could not store secret {name!r}: repeated conflicts")


def secret_delete(secret: Secret, *, by: str = "", via: str = "") -> None:
    with transaction.atomic():
        name = secret.name
        secret.delete()
        audit_append("secret_change", {"name": name, "kind": secret.kind, "action": "deleted", "by": by,
                                       "via": via, "before": {"kind": secret.kind, "value": MASKED},
                                       "after": None, "changed": ["kind", "value"]})
    invalidate_sentinel_cache()


def secret_reveal(secret: Secret) -> str:
    """The plaintext. Only the decision path calls this, to hand the gateway what it injects, and
    secrets_found_in, which compares it and returns names only."""
    try:
        return keyfile.fernet().decrypt(bytes(secret.ciphertext)).decode()
    except InvalidToken:
        raise VaultError(
            f"secret {secret.name!r} cannot be decrypted with the vault key in {keyfile.key_path()}; "
            "the key file was replaced or the ciphertext is damaged"
        ) from None


def secrets_found_in(texts: Sequence[str]) -> list[list[str]]:
    """For each of `texts`, the names (never the values) of the stored secrets whose value occurs in it:
    configuration a box receives (a preset's or a worker's environment and files) must never carry one.
    Each secret is decrypted once. A secret that cannot be decrypted is a VaultError: unknown is not
    "absent"."""
    found: list[list[str]] = [[] for _ in texts]
    if not any(isinstance(t, str) and t for t in texts):
        return found
    for secret in Secret.objects.only("name", "ciphertext").order_by("name"):
        value = secret_reveal(secret)
        for i, text in enumerate(texts):
            if isinstance(text, str) and value in text:
                found[i].append(secret.name)
    return found


class _SentinelIndex:
    """sentinel -> secret id, reloaded when a secret changes in this process (signals) or, for changes
    made by other processes, when the table's fingerprint moves (checked at most every few seconds)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._regex: re.Pattern | None = None
        self._ids: dict[str, int] = {}
        self._names: dict[str, str] = {}
        self._fingerprint: tuple | None = None
        self._checked_at = 0.0
        self._valid = False

    def invalidate(self) -> None:
        with self._lock:
            self._valid = False

    def _fingerprint_now(self) -> tuple:
        agg = Secret.objects.aggregate(n=Count("id"), latest=Max("updated_at"), top=Max("id"))
        return (agg["n"], agg["latest"], agg["top"])

    def lookup(self) -> tuple[re.Pattern | None, dict[str, int]]:
        regex, ids, _names = self.lookup_named()
        return regex, ids

    def lookup_named(self) -> tuple[re.Pattern | None, dict[str, int], dict[str, str]]:
        with self._lock:
            now = time.monotonic()
            if self._valid and now - self._checked_at < settings.ROSTER_VAULT_SENTINEL_CACHE_SECONDS:
                return self._regex, self._ids, self._names
            fingerprint = self._fingerprint_now()
            self._checked_at = now
            if self._valid and fingerprint == self._fingerprint:
                return self._regex, self._ids, self._names
            rows = list(Secret.objects.values_list("sentinel", "id", "name"))
            ids = {sentinel: pk for sentinel, pk, _name in rows}
            ordered = sorted(ids, key=len, reverse=True)
            self._regex = re.compile("|".join(map(re.escape, ordered))) if ordered else None
            self._ids, self._names = ids, {sentinel: name for sentinel, _pk, name in rows}
            self._fingerprint, self._valid = fingerprint, True
            return self._regex, self._ids, self._names


_index = _SentinelIndex()


def invalidate_sentinel_cache(**_kwargs) -> None:
    _index.invalidate()


post_save.connect(invalidate_sentinel_cache, sender=Secret, dispatch_uid="vault-sentinels-save")
post_delete.connect(invalidate_sentinel_cache, sender=Secret, dispatch_uid="vault-sentinels-delete")


def sentinel_secret_ids(texts: Iterable[str]) -> frozenset[int]:
    """Ids of the secrets whose sentinels occur in any of `texts` (also inside HTTP Basic credentials)."""
    regex, ids = _index.lookup()
    if regex is None:
        return frozenset()
    found: set[int] = set()
    for text in texts:
        if not isinstance(text, str) or not text:
            continue
        for candidate in (text, *_basic_decoded(text)):
            found.update(ids[m.group(0)] for m in regex.finditer(candidate))
    return frozenset(found)


def all_sentinels() -> list[str]:
    """Every secret's sentinel (placeholders, never values), for the gateway's whole-request scan."""
    _regex, ids = _index.lookup()
    return sorted(ids)


def mask_sentinels(text: str) -> str:
    """`text` with every known sentinel replaced by `[sentinel of NAME]` (for what is written down, never
    for matching): readers learn which secret it pointed at, never a value to correlate or replay."""
    if not isinstance(text, str) or not text:
        return text
    regex, _ids, names = _index.lookup_named()
    if regex is None:
        return text
    return regex.sub(lambda m: f"[sentinel of {names.get(m.group(0), 'a secret')}]", text)


def _basic_decoded(text: str) -> list[str]:
    out = []
    for m in _BASIC_RE.finditer(text):
        try:
            out.append(base64.b64decode(m.group(1) + "==", validate=False).decode("utf-8", "replace"))
        except ValueError:
            continue
    return out
