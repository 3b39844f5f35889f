"""Caps are configured here and only here (no API changes them); only users with the ledger change
permissions (the Admins group) can edit them. Spend lines are read-only."""

from __future__ import annotations

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


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    list_display = ["pattern", "input_micro_per_million", "cached_input_micro_per_million",
                    "cache_write_micro_per_million", "cache_write_1h_micro_per_million",
                    "output_micro_per_million", "max_output_tokens", "updated_at"]
    search_fields = ["pattern"]

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
