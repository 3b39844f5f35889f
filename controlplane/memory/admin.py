"""Notes in the admin: read-only (a note is written by the trusted side from an allowed proposal), with
forgetting as an action; corrections and a person's full listing are the `memory` command's."""

from django.contrib import admin, messages

from controlplane.memory.models import Note
from controlplane.memory.services import note_forget


@admin.register(Note)
class NoteAdmin(admin.ModelAdmin):
    list_display = ("id", "worker", "scope", "channel", "person", "written_by_run", "untrusted", "created_at",
                    "forgotten_at")
    list_filter = ("scope", "untrusted", "worker")
    search_fields = ("person", "channel")
    actions = ["forget"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description="Forget the selected notes (text erased; the audit keeps the hash)")
    def forget(self, request, queryset):
        for note in queryset:
            note_forget(note.pk, by=request.user.get_username(), reason="admin action")
        self.message_user(request, f"{queryset.count()} note(s) forgotten", messages.SUCCESS)
