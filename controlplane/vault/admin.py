"""Secrets in the admin: the value is write-only (a password field that never renders what is stored);
list and detail pages show name, kind and sentinel. Saves and deletes go through the audited services."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages

from controlplane.core.errors import ValidationFailed
from controlplane.vault import services
from controlplane.vault.models import Secret


class SecretForm(forms.ModelForm):
    value = forms.CharField(
        required=False, strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave empty to keep the stored value. Encrypted at once, never shown.",
    )

    class Meta:
        model = Secret
        fields = ["name", "kind"]

    def clean_value(self):
        value = self.cleaned_data.get("value", "")
        if not value and self.instance.pk is None:
            raise forms.ValidationError("a new secret needs a value")
        if value:
            try:
                services.validate_secret_value(value)
            except ValidationFailed as exc:
                raise forms.ValidationError(exc.errors["value"]) from None
        return value

    def clean_name(self):
        name = self.cleaned_data["name"]
        if self.instance.pk is not None and name != self.instance.name:
            raise forms.ValidationError("a secret cannot be renamed; grants and files refer to it by name")
        return name


@admin.register(Secret)
class SecretAdmin(admin.ModelAdmin):
    form = SecretForm
    list_display = ["name", "kind", "sentinel", "updated_at"]
    search_fields = ["name"]
    readonly_fields = ["sentinel", "created_at", "updated_at"]
    fields = ["name", "kind", "value", "sentinel", "created_at", "updated_at"]
    actions = None

    def save_model(self, request, obj, form, change):
        value = form.cleaned_data.get("value")
        if value:
            saved = services.secret_set(obj.name, value, obj.kind, by=request.user.get_username(),
                                        via="admin")
        else:
            # Kind change without a new value: re-encrypting the stored value keeps one code path.
            current = Secret.objects.get(pk=obj.pk)
            saved = services.secret_set(current.name, services.secret_reveal(current), obj.kind,
                                        by=request.user.get_username(), via="admin")
        obj.pk, obj.sentinel = saved.pk, saved.sentinel
        obj.created_at, obj.updated_at = saved.created_at, saved.updated_at

    def delete_model(self, request, obj):
        if obj.grants.exists():
            messages.error(request, f"secret {obj.name} is named by grants; remove it from them first")
            return
        services.secret_delete(obj, by=request.user.get_username(), via="admin")

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and (obj is None or not obj.grants.exists())
