"""Audit records in the admin: read-only for everyone, superusers included (the database would refuse
a change anyway). Users with audit.export_auditrecord can download the selected records as CSV."""

from __future__ import annotations

from django.contrib import admin
from django.http import StreamingHttpResponse
from django.utils import timezone

from controlplane.audit.export import csv_rows
from controlplane.audit.models import AuditRecord, ModelTrace
from controlplane.core.admin import ReadOnlyAdmin


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    list_display = ["seq", "created_at", "kind", "worker_name", "run_id_ref", "verdict", "reason"]
    list_filter = ["kind", "verdict"]
    search_fields = ["worker_name", "=run_id_ref", "=hash"]
    date_hierarchy = "created_at"
    ordering = ["-seq"]
    actions = ["export_csv"]
    show_full_result_count = False  # no COUNT(*) over a million rows on every page

    def has_export_permission(self, request):
        return request.user.has_perm("audit.export_auditrecord")

    @admin.action(description="Export selected records as CSV", permissions=["export"])
    def export_csv(self, request, queryset):
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        response = StreamingHttpResponse(csv_rows(queryset), content_type="text/csv; charset=utf-8")
        response.headers["Content-Disposition"] = f'attachment; filename="audit-{stamp}.csv"'
        return response


@admin.register(ModelTrace)
class ModelTraceAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "run_id_ref", "grant_slug", "method", "url", "size", "sha256"]
    exclude = ["body"]
    search_fields = ["=run_id_ref", "=decision_id", "grant_slug"]
