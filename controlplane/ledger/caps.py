"""Changing caps and model prices (admin only). Each change is audited as a configuration change in its
transaction, like a grant's."""

from __future__ import annotations

from django.db import transaction

from controlplane.audit.services import audit_append
from controlplane.ledger.models import Cap, ModelPrice


def _describe(cap: Cap) -> dict:
    return {"object": "cap", "scope": f"worker:{cap.worker.name}" if cap.worker_id else "org",
            "unit": cap.unit, "window": cap.window, "limit": cap.limit}


def _stored(cap: Cap) -> dict | None:
    """The cap as the database holds it now (before this change), or None for a new one."""
    if cap.pk is None:
        return None
    before = Cap.objects.select_related("worker").filter(pk=cap.pk).first()
    return _describe(before) if before is not None else None


def cap_save(cap: Cap, user) -> Cap:
    """Saves a cap and records the change as its own kind, with the value before and after, so an auditor
    sees a limit raised from 100 to 10,000 requests without diffing two records."""
    with transaction.atomic():
        old = _stored(cap)
        cap.save()
        new = _describe(cap)
        audit_append("cap_change", {"object": "cap", "event": "created" if old is None else "changed",
                                    "old": old, "new": new, "by": getattr(user, "username", "")},
                     worker=cap.worker.name if cap.worker_id else None)
    return cap


def cap_delete(cap: Cap, user) -> None:
    with transaction.atomic():
        old = _stored(cap) or _describe(cap)
        cap.delete()
        audit_append("cap_change", {"object": "cap", "event": "deleted", "old": old, "new": None,
                                    "by": getattr(user, "username", "")},
                     worker=old["scope"].removeprefix("worker:") if old["scope"] != "org" else None)


def _describe_price(price: ModelPrice) -> dict:
    return {"object": "model_price", "pattern": price.pattern,
            "input_micro_per_million": price.input_micro_per_million,
            "cached_input_micro_per_million": price.cached_input_micro_per_million,
            "output_micro_per_million": price.output_micro_per_million,
            "max_output_tokens": price.max_output_tokens}


def price_save(price: ModelPrice, user) -> ModelPrice:
    with transaction.atomic():
        created = price.pk is None
        price.full_clean()
        price.save()
        audit_append("grant_change", {**_describe_price(price), "event": "created" if created else "changed",
                                      "by": getattr(user, "username", "")})
    return price


def price_delete(price: ModelPrice, user) -> None:
    with transaction.atomic():
        described = _describe_price(price)
        price.delete()
        audit_append("grant_change", {**described, "event": "deleted", "by": getattr(user, "username", "")})
