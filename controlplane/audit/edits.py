"""One way to write an admin-editable object and put the edit on the record. Each kind of object is
described once (`AuditedModel`: what it is called, its name, its values as the record shows them, the
worker it concerns, which values are credential-like); `save` and `delete` then write it and append one
audit record in the same transaction, so the edit and its record commit or roll back together.

The record's data: `object`, `name`, `action` (created | updated | deleted), `by` (who), `via` (admin,
cli, a file import...), `before` and `after` (the described values, credential-like ones masked), and
`changed` (the names of the values that differ, masked ones included). Its worker column is the worker
the object concerns, so the auditor's worker filter finds the edit; an edit that moves an object from
one worker to another also names the old one (`moved_from_worker`). An edit that changes nothing is
neither written nor recorded."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db import models, transaction

from controlplane.audit.services import audit_append

MASKED = "[masked]"


def _no_worker(_obj) -> str | None:
    return None


@dataclass(frozen=True)
class AuditedModel:
    """How one kind of admin-editable object goes on the record."""

    object: str  # the record's word for the kind: "grant", "destination", "cap"...
    name: Callable[[models.Model], str]  # the object's natural key as people know it (slug, name, scope)
    describe: Callable[[models.Model], dict]  # its values, JSON-ready, never a secret's value
    worker: Callable[[models.Model], str | None] = _no_worker  # the worker's name it concerns, if any
    kind: str = "grant_change"  # the audit kind (configuration changes share one)
    masked: frozenset[str] = field(default_factory=frozenset)  # described keys holding credential-like values

    def save(self, instance: models.Model, *, by: str, via: str) -> str:
        """Write `instance` (new, or a stored row with new values set): "created", "updated" or
        "unchanged". The stored row is read under a row lock first, so two admins' edits record a true
        sequence of before and after."""
        with transaction.atomic():
            stored = None
            if instance.pk is not None:
                stored = type(instance)._default_manager.select_for_update().filter(pk=instance.pk).first()
            before = self.describe(stored) if stored is not None else None
            after = self.describe(instance)
            if before == after:
                return "unchanged"
            instance.save()
            action = "created" if before is None else "updated"
            previous = self.worker(stored) if stored is not None else None
            self._record(action, self.name(instance), before, after, self.worker(instance), previous, by, via)
            return action

    def delete(self, instance: models.Model, *, by: str, via: str) -> None:
        with transaction.atomic():
            before, name, worker = self.describe(instance), self.name(instance), self.worker(instance)
            instance.delete()
            self._record("deleted", name, before, None, worker, worker, by, via)

    def delete_all(self, instances: Iterable[models.Model], *, by: str, via: str) -> None:
        """Each one deleted and recorded on its own, in one transaction (the admin's bulk delete)."""
        with transaction.atomic():
            for instance in instances:
                self.delete(instance, by=by, via=via)

    def _mask(self, values: dict | None) -> dict | None:
        if values is None or not self.masked:
            return values
        return {k: (MASKED if k in self.masked and v not in (None, "") else v) for k, v in values.items()}

    def _record(self, action: str, name: str, before: dict | None, after: dict | None, worker: str | None,
                previous_worker: str | None, by: str, via: str) -> None:
        keys = set(before or {}) | set(after or {})
        changed = sorted(k for k in keys if (before or {}).get(k) != (after or {}).get(k))
        data = {"object": self.object, "name": name, "action": action, "by": by, "via": via,
                "before": self._mask(before), "after": self._mask(after), "changed": changed}
        if previous_worker and previous_worker != worker:
            data["moved_from_worker"] = previous_worker
        audit_append(self.kind, data, worker=worker or previous_worker)
