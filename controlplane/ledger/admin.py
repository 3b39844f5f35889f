"""Caps are configured here and only here (no API changes them); only users with the ledger change
permissions (the Admins group) can edit them. Spend lines are read-only."""

from __future__ import annotations

from decimal import Decimal

from django import forms
from django.contrib import admin

from controlplane.core.admin import ReadOnlyAdmin
from controlplane.ledger import caps
from controlplane.ledger.models import Cap, ModelCallReservation, ModelPrice, SpendLine

UNIT_HELP = ("Counted in the cap's unit: requests (one per allowed request), bytes (request and response "
             "bytes), micro-currency (1,000,000 = one unit of currency) or model tokens.")


class CapForm(forms.ModelForm):
    class Meta:
        model = Cap
        fields = ["worker", "unit", "window", "limit"]
        help_texts = {"limit": UNIT_HELP}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:  # the unit next to the number, in the label the admin reads
            self.fields["limit"].label = (f"Limit ({self.instance.get_unit_display().lower()} per "
                                          f"{self.instance.get_window_display().lower()})")


@admin.register(Cap)
class CapAdmin(admin.ModelAdmin):
    form = CapForm
    list_display = ["__str__", "worker", "unit", "window", "limit_with_unit"]
    list_filter = ["unit", "window"]

    @admin.display(description="limit", ordering="limit")
    def limit_with_unit(self, cap: Cap) -> str:
        return f"{cap.limit:,} {cap.get_unit_display().lower()} per {cap.get_window_display().lower()}"

    def save_model(self, request, obj, form, change):
        caps.cap_save(obj, request.user)

    def delete_model(self, request, obj):
        caps.cap_delete(obj, request.user)

    def delete_queryset(self, request, queryset):
        caps.CAP_EDITS.delete_all(queryset.select_related("worker"), by=request.user.get_username(),
                                  via="admin")


MICRO = 1_000_000  # micro-currency in one unit of currency
# The stored micro field of each price, and the label of the currency field the admin types into.
PRICE_FIELDS = {
    "input_micro_per_million": "Input",
    "cached_input_micro_per_million": "Cached input",
    "output_micro_per_million": "Output",
    "cache_write_micro_per_million": "Cache write (5 min)",
    "cache_write_1h_micro_per_million": "Cache write (1 h)",
}


def in_currency(micro: int | None) -> str:
    """`2.50 (2,500,000 micro)`: the price as entered, and what is stored and audited."""
    if micro is None:
        return "—"
    return f"{Decimal(micro) / MICRO:,.6f}".rstrip("0").rstrip(".") + f" ({micro:,} micro)"


class ModelPriceForm(forms.ModelForm):
    """Prices are typed in currency per million tokens (2.50), not micro-currency (2500000), and stored
    as micro: a slipped zero in a seven-digit number was a price ten times off. Each field says the micro
    value it stands for."""

    class Meta:
        model = ModelPrice
        fields = ["pattern", "max_output_tokens"]
        help_texts = {"pattern": "a model name (gpt-4o-mini) or a glob on one (gpt-4o*, claude-3-[57]-*)"}

    # Declared, not added in __init__: the admin builds its form class from the names it lists.
    for _name, _label in PRICE_FIELDS.items():
        locals()[f"{_name}__currency"] = forms.DecimalField(
            label=f"{_label} price (currency per million tokens)", min_value=0, decimal_places=6,
            max_digits=18, required=not _name.startswith("cache_write"))
    del _name, _label

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in PRICE_FIELDS:
            stored = getattr(self.instance, name, None) if self.instance.pk else None
            field = self.fields[f"{name}__currency"]
            if stored is not None:
                self.initial.setdefault(f"{name}__currency", Decimal(stored) / MICRO)
            field.help_text = ((f"now {in_currency(stored)}; " if stored is not None else "")
                               + "stored in micro-currency: 1 = 1,000,000 micro"
                               + ("; blank: priced as input" if name.startswith("cache_write") else ""))

    def clean(self):
        cleaned = super().clean()
        for name in PRICE_FIELDS:
            value = cleaned.get(f"{name}__currency")
            setattr(self.instance, name, None if value is None else int(value * MICRO))
        return cleaned


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    form = ModelPriceForm
    list_display = ["pattern", "input_price", "cached_input_price", "output_price", "cache_write_price",
                    "max_output_tokens", "updated_at"]
    search_fields = ["pattern"]

    def get_fields(self, request, obj=None):
        return ["pattern", *(f"{name}__currency" for name in PRICE_FIELDS), "max_output_tokens"]

    @admin.display(description="input per million tokens", ordering="input_micro_per_million")
    def input_price(self, price: ModelPrice) -> str:
        return in_currency(price.input_micro_per_million)

    @admin.display(description="cached input", ordering="cached_input_micro_per_million")
    def cached_input_price(self, price: ModelPrice) -> str:
        return in_currency(price.cached_input_micro_per_million)

    @admin.display(description="output", ordering="output_micro_per_million")
    def output_price(self, price: ModelPrice) -> str:
        return in_currency(price.output_micro_per_million)

    @admin.display(description="cache write (5 min / 1 h)")
    def cache_write_price(self, price: ModelPrice) -> str:
        return f"{in_currency(price.cache_write_micro_per_million)} / " \
               f"{in_currency(price.cache_write_1h_micro_per_million)}"

    def save_model(self, request, obj, form, change):
        caps.price_save(obj, request.user)

    def delete_model(self, request, obj):
        caps.price_delete(obj, request.user)

    def delete_queryset(self, request, queryset):
        caps.PRICE_EDITS.delete_all(queryset, by=request.user.get_username(), via="admin")


@admin.register(ModelCallReservation)
class ModelCallReservationAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "decision_id", "model", "price_pattern", "tokens", "micro"]
    search_fields = ["=decision_id", "model"]
    show_full_result_count = False


@admin.register(SpendLine)
class SpendLineAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "worker", "run", "grant_slug", "decision_id", "kind", "unit", "amount"]
    list_filter = ["kind", "unit"]
    search_fields = ["=decision_id", "grant_slug", "worker__name"]
    list_select_related = ["worker"]
    show_full_result_count = False
