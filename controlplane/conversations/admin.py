"""Channels, chat servers and people's chat ids in the admin, saved through the audited config services;
messages, deliveries and approval posts read-only (they change only through the relay's services)."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import ValidationError

from controlplane.conversations.config_services import channel_problems, config_delete, config_save
from controlplane.conversations.models import (
    ApprovalPost,
    Channel,
    ChatIdentity,
    ChatServer,
    Delivery,
    Message,
)
from controlplane.core.admin import ReadOnlyAdmin


class AuditedAdmin(admin.ModelAdmin):
    def save_model(self, request, obj, form, change):
        config_save(obj, actor=request.user.get_username())

    def delete_model(self, request, obj):
        config_delete(obj, actor=request.user.get_username())

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            config_delete(obj, actor=request.user.get_username())


@admin.register(ChatServer)
class ChatServerAdmin(AuditedAdmin):
    list_display = ("name", "homeserver_url", "bot_user_id", "enabled")
    fields = ("name", "homeserver_url", "bot_user_id", "access_token", "enabled")


@admin.register(Channel)
class ChannelAdmin(AuditedAdmin):
    list_display = ("name", "kind", "purpose", "worker", "enabled", "room_id")
    list_filter = ("kind", "purpose", "enabled")
    fields = (
        "name",
        "kind",
        "purpose",
        "worker",
        "enabled",
        "server",
        "room_id",
        "signing_secret",
        "reply_url",
        "owners",
        "max_message_chars",
    )

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)

        class Checked(form):
            def _post_clean(self):
                super()._post_clean()
                for field, problem in channel_problems(self.instance).items():
                    self.add_error(field if field in self.fields else None, ValidationError(problem))

        return Checked


@admin.register(ChatIdentity)
class ChatIdentityAdmin(AuditedAdmin):
    list_display = ("chat_id", "kind", "user")
    list_filter = ("kind",)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ("sent_at", "channel", "direction", "speaker_id", "role", "run")
    list_filter = ("channel", "direction", "role")


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    list_display = ("run", "channel", "status", "attempts", "delivered_at")


@admin.register(ApprovalPost)
class ApprovalPostAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "channel", "approval", "proposal", "external_id", "shown_status")
