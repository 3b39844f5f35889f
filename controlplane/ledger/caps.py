"""Changing caps and model prices (admin only). Each change is audited in its transaction through
controlplane.audit.edits: a cap change as its own kind (`cap_change`), under the cap's worker, a price
change as a configuration change (`grant_change`); both with the values before and after."""

from __future__ import annotations

from controlplane.audit.edits import AuditedModel
from controlplane.ledger.models import Cap, ModelPrice


def _describe(cap: Cap) -> dict:
    return {"scope": f"worker:{cap.worker.name}" if cap.worker_id else "org",
            "unit": cap.unit, "window": cap.window, "limit": cap.limit}


CAP_EDITS = AuditedModel(
    "cap", kind="cap_change", describe=_describe,
    name=lambda cap: f"{_describe(cap)['scope']} {cap.unit} per {cap.window}",
    worker=lambda cap: cap.worker.name if cap.worker_id else None,
)


def _describe_price(price: ModelPrice) -> dict:
    return {"pattern": price.pattern,
            "input_micro_per_million": price.input_micro_per_million,
            "cached_input_micro_per_million": price.cached_input_micro_per_million,
            "output_micro_per_million": price.output_micro_per_million,
            "cache_write_micro_per_million": price.cache_write_micro_per_million,
            "cache_write_1h_micro_per_million": price.cache_write_1h_micro_per_million,
            "max_output_tokens": price.max_output_tokens}


PRICE_EDITS = AuditedModel("model_price", name=lambda price: price.pattern, describe=_describe_price)


def _username(user) -> str:
    return getattr(user, "username", "")


def cap_save(cap: Cap, user) -> Cap:
    """Create or change a cap, recorded with its old and new value (old is null for a new cap)."""
    CAP_EDITS.save(cap, by=_username(user), via="admin")
    return cap


def cap_delete(cap: Cap, user) -> None:
    CAP_EDITS.delete(cap, by=_username(user), via="admin")


def price_save(price: ModelPrice, user) -> ModelPrice:
    price.full_clean()
    PRICE_EDITS.save(price, by=_username(user), via="admin")
    return price


def price_delete(price: ModelPrice, user) -> None:
    PRICE_EDITS.delete(price, by=_username(user), via="admin")
