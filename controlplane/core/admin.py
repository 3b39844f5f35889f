"""The one read-only admin: for records that change only through services (runs, approvals) or never
(audit records, spend lines, traces). Nobody adds, changes or deletes them here, superusers included."""

from __future__ import annotations

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
