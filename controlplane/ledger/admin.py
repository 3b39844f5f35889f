"""Caps are configured here and only here (no API changes them); only users with the ledger change
permissions (the Admins group) can edit them. Spend lines are read-only."""

from __future__ import annotations

from django.contrib import admin

from controlplane.core.admin import ReadOnlyAdmin
from controlplane.ledger import caps
from controlplane.ledger.models import Cap, SpendLine


@admin.register(Cap)
class CapAdmin(admin.ModelAdmin):
    list_display = ["__str__", "worker", "unit", "window", "limit"]
    list_filter = ["unit", "window"]

    def save_model(self, request, obj, form, change):
        caps.cap_save(obj, request.user)

    def delete_model(self, request, obj):
        caps.cap_delete(obj, request.user)

    def delete_queryset(self, request, queryset):
        for cap in queryset:
            caps.cap_delete(cap, request.user)


@admin.register(SpendLine)
class SpendLineAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "worker", "run", "grant_slug", "decision_id", "kind", "unit", "amount"]
    list_filter = ["kind", "unit"]
    search_fields = ["=decision_id", "grant_slug", "worker__name"]
    list_select_related = ["worker"]
    show_full_result_count = False
