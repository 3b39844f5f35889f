"""Presets and workers' agents in the admin. Built-in presets are shown read-only (their files are the
source); custom presets are edited as one TOML text through the same validator as the files. A worker's
agent (preset, model, base URL) and its admin-only image and environment are set on its own page, saved
through the audited services; the page shows the grant its preset suggests and saves it when asked."""

from __future__ import annotations

import tomllib

import tomli_w
from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html

from controlplane.agents import services, suggestions
from controlplane.agents.models import Preset, WorkerAgent
from controlplane.agents.selectors import AgentChoice
from controlplane.agents.spec import validate_preset
from controlplane.core.errors import RosterError, ValidationFailed
from controlplane.core.roles import ADMINS
from controlplane.vault.models import Secret


def is_admin(user) -> bool:
    """Image and environment of boxes are capability: only a superuser or a member of Admins sets them."""
    return bool(user.is_active and (user.is_superuser or user.groups.filter(name=ADMINS).exists()))


def _who(request) -> str:
    return request.user.get_username()


class CustomPresetForm(forms.ModelForm):
    definition = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 24, "cols": 100, "style": "font-family: monospace"}),
        help_text="The preset in file form (docs/presets.md), e.g. slug, title, image or npm_packages / "
                  "pypi_packages, wire, command, answer, key_variable, [env], [[files]], [suggested_grant].")

    class Meta:
        model = Preset
        fields: list[str] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["definition"] = tomli_w.dumps(services.preset_data(self.instance))
        self.spec = None

    def clean(self):
        cleaned = super().clean()
        try:
            data = tomllib.loads(cleaned.get("definition") or "")
        except tomllib.TOMLDecodeError as exc:
            self.add_error("definition", f"not valid TOML: {exc}")
            return cleaned
        try:
            slug = self.instance.slug if self.instance.pk else None
            self.spec = validate_preset(data, slug=slug, custom=True)
        except ValidationFailed as exc:
            self.add_error("definition", [f"{k}: {v}" for k, v in exc.errors.items()])
        return cleaned


@admin.register(Preset)
class PresetAdmin(admin.ModelAdmin):
    list_display = ["slug", "kind", "title", "wire", "image", "updated_at"]
    list_filter = ["kind", "wire"]
    search_fields = ["slug", "title"]
    form = CustomPresetForm
    readonly_fields = ["file_form", "source", "source_sha256", "created_at", "updated_at"]

    def has_change_permission(self, request, obj=None):
        if obj is not None and obj.kind == Preset.Kind.BUILTIN:
            return False  # its file is the source: edit workers/presets/<slug>/preset.toml
        return super().has_change_permission(request, obj) and is_admin(request.user)

    def has_add_permission(self, request):
        return super().has_add_permission(request) and is_admin(request.user)

    def has_delete_permission(self, request, obj=None):
        if obj is not None and obj.kind == Preset.Kind.BUILTIN:
            return False
        return super().has_delete_permission(request, obj) and is_admin(request.user)

    def get_fields(self, request, obj=None):
        if obj is not None and not self.has_change_permission(request, obj):
            return ["slug", "kind", "title", "file_form", "source", "source_sha256", "updated_at"]
        return ["definition"] if obj is None else ["definition", "source", "created_at", "updated_at"]

    @admin.display(description="Preset (file form)")
    def file_form(self, obj):
        return format_html("<pre>{}</pre>", tomli_w.dumps(services.preset_data(obj))) if obj else ""

    def save_model(self, request, obj, form, change):
        preset, _action = services.preset_save(form.spec, kind=Preset.Kind.CUSTOM, by=_who(request),
                                               via="admin")
        obj.pk, obj.slug = preset.pk, preset.slug
        obj.created_at, obj.updated_at = preset.created_at, preset.updated_at

    def delete_model(self, request, obj):
        services.preset_delete(obj, by=_who(request), via="admin")

    def delete_queryset(self, request, queryset):
        for preset in queryset:
            services.preset_delete(preset, by=_who(request), via="admin")


def _environment_text(env: dict) -> str:
    return "\n".join(f"{k}={v}" for k, v in sorted((env or {}).items()))


class WorkerAgentForm(forms.ModelForm):
    environment = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 4, "style": "font-family: monospace"}),
        help_text="NAME=value, one per line, for every box of this worker (after the preset's own). Never "
                  "a secret (store it in the vault and grant it); never a variable Roster sets (proxy, CA, "
                  "HOME, ROSTER_*, key sentinels).")
    save_suggested_grant_with = forms.ModelChoiceField(
        Secret.objects.all(), required=False, label="Also save the suggested grant with secret",
        help_text="Saves the grant shown below (the preset's model paths with this key injected and traced) "
                  "as this worker's grant, audited. Leave empty to save only the agent settings.")

    class Meta:
        model = WorkerAgent
        fields = ["worker", "preset", "model", "base_url", "image"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["environment"] = _environment_text(self.instance.environment)

    def clean(self):
        cleaned = super().clean()
        env: dict[str, str] = {}
        for number, line in enumerate((cleaned.get("environment") or "").splitlines(), start=1):
            if not line.strip():
                continue
            name, eq, value = line.partition("=")
            if not eq:
                self.add_error("environment", f"line {number}: write NAME=value")
                return cleaned
            env[name.strip()] = value
        cleaned["environment"] = env
        problems = services.worker_agent_problems(
            cleaned.get("preset"), model=cleaned.get("model") or "", base_url=cleaned.get("base_url") or "",
            image=cleaned.get("image") or "", environment=env)
        for field, message in problems.items():
            target = "environment" if field.startswith("environment") or field == "vault" else field
            self.add_error(target if target in self.fields else None, f"{field}: {message}")
        return cleaned


@admin.register(WorkerAgent)
class WorkerAgentAdmin(admin.ModelAdmin):
    form = WorkerAgentForm
    list_display = ["worker", "preset", "model", "base_url", "image", "updated_at"]
    list_select_related = ["worker", "preset"]
    search_fields = ["worker__name", "preset__slug", "model"]
    readonly_fields = ["suggested_grant", "updated_at"]
    fields = ["worker", "preset", "model", "base_url", "image", "environment", "suggested_grant",
              "save_suggested_grant_with", "updated_at"]

    def has_add_permission(self, request):
        return super().has_add_permission(request) and is_admin(request.user)

    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and is_admin(request.user)

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and is_admin(request.user)

    def get_readonly_fields(self, request, obj=None):
        return [*self.readonly_fields, "worker"] if obj is not None else self.readonly_fields

    @admin.display(description="Suggested grant (its preset's model paths on this base URL)")
    def suggested_grant(self, obj):
        if obj is None or obj.pk is None:
            return "Save to see the grant this preset suggests."
        choice = AgentChoice(preset=obj.preset, spec=services.preset_spec(obj.preset), model=obj.model,
                             base_url=obj.base_url)
        try:
            text = suggestions.suggested_grant_toml(obj.worker, choice, "SECRET-NAME")
        except RosterError as exc:
            return str(exc)
        return format_html("<pre>{}</pre>", text)

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        worker = obj.worker
        agent, _action = services.worker_agent_set(
            worker, data["preset"], model=data.get("model") or "", base_url=data.get("base_url") or "",
            image=data.get("image") or "", environment=data["environment"], by=_who(request), via="admin")
        obj.pk = agent.pk
        secret = data.get("save_suggested_grant_with")
        if secret is not None:
            choice = AgentChoice(preset=agent.preset, spec=services.preset_spec(agent.preset),
                                 model=agent.model, base_url=agent.base_url)
            try:
                grant, action = suggestions.suggested_grant_save(worker, choice, secret.name,
                                                                 by=_who(request), via="admin")
            except (RosterError, ValidationFailed) as exc:
                self.message_user(request, f"the suggested grant was not saved: {exc}", messages.ERROR)
                return
            self.message_user(request, f"grant {grant.slug}: {action}")
            note = suggestions.kind_note(choice, secret)
            if note:
                self.message_user(request, note, messages.WARNING)

    def delete_model(self, request, obj):
        services.worker_agent_clear(obj.worker, by=_who(request), via="admin")

    def delete_queryset(self, request, queryset):
        for agent in queryset.select_related("worker"):
            services.worker_agent_clear(agent.worker, by=_who(request), via="admin")
