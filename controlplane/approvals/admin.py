"""Approvals in the admin are read-only: deciding goes through approval_decide (web queue or CLI), which
checks the permission and writes the audit record."""

from django.contrib import admin

from controlplane.approvals.models import Approval
from controlplane.core.admin import ReadOnlyAdmin


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = ["id", "run", "grant_slug", "status", "created_at", "expires_at", "decided_by", "channel"]
    list_filter = ["status", "channel"]
    search_fields = ["grant_slug", "request_digest"]
