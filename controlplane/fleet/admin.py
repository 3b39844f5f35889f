"""Admin for workers and runs. A worker's identity (what it *is*) is editable only by a superuser or a
member of the Admins group; runs are read-only here (they change through services;
controlplane.dispatch.admin adds the start and cancel actions)."""

from __future__ import annotations

from django.contrib import admin

from controlplane.audit.edits import AuditedModel
from controlplane.core.admin import ReadOnlyAdmin
from controlplane.core.roles import ADMINS
from controlplane.fleet.models import Run, Worker


def can_edit_identity(user) -> bool:
    return bool(user.is_active and (user.is_superuser or user.groups.filter(name=ADMINS).exists()))


# A worker's edit (its identity, which always needs a human, included) is on the record under that worker,
# with the values before and after (controlplane.audit.edits).
WORKER_EDITS = AuditedModel(
    "worker", name=lambda worker: worker.name, worker=lambda worker: worker.name, kind="worker_change",
    describe=lambda worker: {"name": worker.name, "description": worker.description,
                             "identity": worker.identity, "active": worker.active},
)


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin):
    list_display = ["name", "active", "created_at"]
    list_filter = ["active"]
    search_fields = ["name", "description"]
    fields = ["name", "description", "identity", "active", "created_at"]

    def get_readonly_fields(self, request, obj=None):
        readonly = ["created_at"]
        if not can_edit_identity(request.user):
            readonly.append("identity")
        return readonly

    def save_model(self, request, obj, form, change):
        WORKER_EDITS.save(obj, by=request.user.get_username(), via="admin")

    def delete_model(self, request, obj):
        WORKER_EDITS.delete(obj, by=request.user.get_username(), via="admin")

    def delete_queryset(self, request, queryset):
        WORKER_EDITS.delete_all(queryset, by=request.user.get_username(), via="admin")


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ["id", "worker", "origin", "status", "taint", "input_trust", "created_at", "ended_at"]
    list_filter = ["status", "origin", "untrusted", "taint"]
    search_fields = ["worker__name", "status_reason"]
    # The token hash is never shown: it is useless to a person and only helps an attacker probe.
    exclude = ["token_hash"]

    @admin.display(description="Untrusted input", ordering="untrusted")
    def input_trust(self, run: Run) -> str:
        # Not the boolean icon: a green check on a run that has read untrusted content reads as "fine".
        return "⚠ untrusted" if run.untrusted else "trusted"

