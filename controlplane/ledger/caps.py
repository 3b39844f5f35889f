"""Changing caps and model prices (admin only). Each change is audited as a configuration change in its
transaction, like a grant's."""

from __future__ import annotations

from django.db import transaction

from controlplane.audit.services import audit_append
from controlplane.ledger.models import Cap, ModelPrice


def _describe(cap: Cap) -> dict:
    return {"object": "cap", "scope": f"worker:{cap.worker.name}" if cap.worker_id else "org",
            "unit": cap.unit, "window": cap.window, "limit": cap.limit}


def cap_save(cap: Cap, user) -> Cap:
    with transaction.atomic():
        created = cap.pk is None
        cap.save()
        audit_append("grant_change", {**_describe(cap), "event": "created" if created else "changed",
                                      "by": getattr(user, "username", "")},
                     worker=cap.worker.name if cap.worker_id else None)
    return cap


def cap_delete(cap: Cap, user) -> None:
    with transaction.atomic():
        described = _describe(cap)
        cap.delete()
        audit_append("grant_change", {**described, "event": "deleted", "by": getattr(user, "username", "")},
                     worker=described["scope"].removeprefix("worker:") if cap.worker_id else None)


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
