"""Changing caps and model prices (admin only). Each change is audited in its transaction: a cap change
as its own kind (`cap_change`, old and new value), a price change as a configuration change."""

from __future__ import annotations

from django.db import transaction

from controlplane.audit.services import audit_append
from controlplane.ledger.models import Cap, ModelPrice


def _describe(cap: Cap) -> dict:
    return {"object": "cap", "scope": f"worker:{cap.worker.name}" if cap.worker_id else "org",
            "unit": cap.unit, "window": cap.window, "limit": cap.limit}


def cap_save(cap: Cap, user) -> Cap:
    """Create or change a cap; audited as `cap_change` with the old and the new value (old is null for
    a new cap). The old value is read under a row lock so two admins' changes record a true sequence."""
    with transaction.atomic():
        created = cap.pk is None
        before = None
        if not created:
            stored = Cap.objects.select_for_update().select_related("worker").filter(pk=cap.pk).first()
            before = _describe(stored) if stored is not None else None
        cap.save()
        after = _describe(cap)
        audit_append("cap_change", {"object": "cap", "scope": after["scope"],
                                    "event": "created" if created else "changed",
                                    "old": before, "new": after, "by": getattr(user, "username", "")},
                     worker=cap.worker.name if cap.worker_id else None)
    return cap


def cap_delete(cap: Cap, user) -> None:
    with transaction.atomic():
        described = _describe(cap)
        cap.delete()
        audit_append("cap_change", {"object": "cap", "scope": described["scope"], "event": "deleted",
                                    "old": described, "new": None, "by": getattr(user, "username", "")},
                     worker=described["scope"].removeprefix("worker:") if cap.worker_id else None)


def _describe_price(price: ModelPrice) -> dict:
    return {"object": "model_price", "pattern": price.pattern,
            "input_micro_per_million": price.input_micro_per_million,
            "cached_input_micro_per_million": price.cached_input_micro_per_million,
            "output_micro_per_million": price.output_micro_per_million,
            "cache_write_micro_per_million": price.cache_write_micro_per_million,
            "cache_write_1h_micro_per_million": price.cache_write_1h_micro_per_million,
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
