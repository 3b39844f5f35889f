"""Grants in the admin. The form runs the shared validator (controlplane.policy.validation) and shows
its messages on the fields they name; every save and delete goes through the audited grant services;
the change page previews in plain words what the saved grant matches, and "test a request" answers in a
result panel above the form without saving."""

from __future__ import annotations

import re

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html, format_html_join

from controlplane.core.errors import ValidationFailed
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Worker
from controlplane.policy import admin_trial, conditions, preview
from controlplane.policy.engine import GrantRule
from controlplane.policy.grant_services import GRANT_EDITS, grant_delete, grant_save
from controlplane.policy.models import Grant
from controlplane.policy.validation import validate_grant

# Validator field names that differ from the form's.
_FIELD_FOR_ERROR = {"expires": "expires_at"}


def _split(text: str) -> list[str]:
    return [part for part in re.split(r"[\s,]+", text or "") if part]


def parse_conditions(text: str) -> list[dict] | str:
    """The form's header conditions, one per line: "content-type: equals application/json",
    "x-http-method-override: absent", "x-tenant: present", "accept: matches application/(json|xml)".
    Returns the file form for the validator, or a message naming the line that cannot be read."""
    out = []
    for number, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip():
            continue
        name, colon, rest = line.partition(":")
        op, _, value = rest.strip().partition(" ")
        if not colon or op not in conditions.OPS or (op in conditions.VALUE_OPS) != bool(value.strip()):
            return (f"line {number}: write 'NAME: present', 'NAME: absent', 'NAME: equals VALUE' or "
                    "'NAME: matches PATTERN'")
        out.append({"name": name.strip(), op: value.strip() if op in conditions.VALUE_OPS else True})
    return out


def format_conditions(stored) -> str:
    return "\n".join(f"{c['name']}: {op}" + (f" {c[op]}" if op in conditions.VALUE_OPS else "")
                     for c in stored or () for op in conditions.OPS if op in c)


class GrantForm(forms.ModelForm):
    methods = forms.CharField(required=False, help_text="e.g. GET POST; empty: any method")
    schemes = forms.CharField(required=False, help_text="http and/or https; empty: https only")
    paths = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                            help_text="one pattern per line: /v1/chat, /v1/*, /v1/**; empty: any path")
    mcp_tools = forms.CharField(required=False, help_text="MCP tool names; empty: any (and non-MCP traffic)")
    header_conditions = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3}),
        help_text="one per line, judged on the box's headers: 'content-type: equals application/json', "
                  "'x-http-method-override: absent', 'x-tenant: present', 'accept: matches "
                  "application/(json|xml)' (RE2, whole value); a credential header only present/absent")
    # "Test a request": judged against every grant, with this form's unsaved values in place of the grant.
    try_only = forms.BooleanField(required=False, label="Only test a request, don't save",
                                  help_text="Tick, fill in the request below and press Save: nothing is "
                                            "saved; the answer names the grant that decides it and why.")
    try_worker = forms.ModelChoiceField(Worker.objects.all(), required=False, label="Worker")
    try_method = forms.CharField(required=False, initial="GET", max_length=16, label="Method")
    try_url = forms.CharField(required=False, max_length=8192, label="URL",
                              widget=forms.TextInput(attrs={"size": 60}))
    try_headers = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                                  label="Headers (optional)", help_text="Name: value, one per line")
    try_body_size = forms.IntegerField(required=False, min_value=0, label="Body size in bytes (optional)")
    try_mcp_tool = forms.CharField(required=False, max_length=256, label="MCP tool (optional)")
    try_dry_run_days = forms.IntegerField(
        required=False, min_value=1, max_value=3660, label="Dry-run over the last N days (optional)",
        help_text="Replays the decisions recorded in that time against the grants with this unsaved change "
                  "and lists the verdicts that would change (audited as a dry-run).")

    class Meta:
        model = Grant
        fields = ["slug", "description", "enabled", "worker", "mode", "host", "port", "schemes", "methods",
                  "paths", "mcp_tools", "header_conditions", "max_body_size", "tunnel", "max_taint",
                  "result_class", "untrusted", "expires_at", "secret", "inject_header", "inject_format",
                  "cost_per_call", "trace", "journal", "wire"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            for name in ("methods", "schemes", "mcp_tools"):
                self.initial[name] = " ".join(getattr(self.instance, name) or [])
            self.initial["paths"] = "\n".join(self.instance.paths or [])
            self.initial["header_conditions"] = format_conditions(self.instance.header_conditions)
        self.spec = None
        self.trial_panel = None  # a test's answer, shown above the form
        self.actor = ""  # set by the admin: who a dry-run's record names

    def clean(self):
        cleaned = super().clean()
        slug = cleaned.get("slug") or (self.instance.slug if self.instance.pk else "")
        worker, secret = cleaned.get("worker"), cleaned.get("secret")
        data = {
            "description": cleaned.get("description", ""),
            "host": cleaned.get("host", ""),
            "methods": _split(cleaned.get("methods")),
            "schemes": _split(cleaned.get("schemes")),
            "paths": [p.strip() for p in (cleaned.get("paths") or "").splitlines() if p.strip()],
            "mcp_tools": _split(cleaned.get("mcp_tools")),
            "mode": cleaned.get("mode", ""),
            "inject_header": cleaned.get("inject_header") or "",
            "inject_format": cleaned.get("inject_format") or "{secret}",
            "cost_per_call": cleaned.get("cost_per_call", 0),
            "wire": cleaned.get("wire") or "",
        }
        for name in ("untrusted", "tunnel", "trace", "journal", "enabled"):
            data[name] = bool(cleaned.get(name))
        for name in ("max_taint", "result_class"):
            value = cleaned.get(name)
            data[name] = DataClass(int(value)).label if value not in (None, "") else ""
        if cleaned.get("port") is not None:
            data["port"] = cleaned["port"]
        if cleaned.get("max_body_size") is not None:
            data["max_body_size"] = cleaned["max_body_size"]
        parsed = parse_conditions(cleaned.get("header_conditions"))
        if isinstance(parsed, str):
            self.add_error("header_conditions", parsed)
        else:
            data["header_conditions"] = parsed
        if cleaned.get("expires_at") is not None:
            data["expires"] = cleaned["expires_at"]
        if worker is not None:
            data["worker"] = worker.name
        if secret is not None:
            data["secret"] = secret.name
        if self.errors:
            return cleaned  # field-level errors first; the validator would repeat them
        try:
            self.spec = validate_grant(data, slug=slug)
        except ValidationFailed as exc:
            for field, message in exc.errors.items():
                field = _FIELD_FOR_ERROR.get(field, field)
                self.add_error(field if field in self.fields else None, message)
        if cleaned.get("try_only") and self.spec is not None:
            try:
                self.trial_panel = admin_trial.answer(self.spec, cleaned, self.instance, actor=self.actor)
            except forms.ValidationError as exc:
                self.add_error("try_url", exc)
        elif cleaned.get("try_only"):
            self.add_error("try_url", "Nothing tested or saved: fix the grant's errors first.")
        return cleaned

    def is_valid(self) -> bool:
        # A test is answered, never saved: the admin then shows the page again, with the panel and
        # without an error note (the form has no errors).
        return super().is_valid() and self.trial_panel is None


@admin.register(Grant)
class GrantAdmin(admin.ModelAdmin):
    form = GrantForm
    list_display = ["slug", "host", "port", "mode", "worker", "secret", "max_taint", "enabled", "expires_at"]
    list_filter = ["mode", "enabled", "tunnel", "worker"]
    search_fields = ["slug", "host", "description"]
    readonly_fields = ["what_this_matches", "created_at", "updated_at"]
    actions = ["delete_selected"]
    change_form_template = "admin/policy/grant/change_form.html"

    def render_change_form(self, request, context, *args, **kwargs):
        adminform = context.get("adminform")
        context["trial_panel"] = getattr(getattr(adminform, "form", None), "trial_panel", None)
        return super().render_change_form(request, context, *args, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        # The slug is the file id; renaming would orphan files and audit history.
        return [*self.readonly_fields, "slug"] if obj is not None else self.readonly_fields

    def get_fields(self, request, obj=None):
        fields = list(GrantForm.Meta.fields)
        if obj is not None:
            fields = ["what_this_matches", *fields, "created_at", "updated_at"]
        return fields

    def get_form(self, request, obj=None, change=False, **kwargs):
        form_class = super().get_form(request, obj, change=change, **kwargs)
        actor = request.user.get_username()

        class WithActor(form_class):
            def __init__(self, *args, **kw):
                super().__init__(*args, **kw)
                self.actor = actor

        return WithActor

    def get_fieldsets(self, request, obj=None):
        return [(None, {"fields": self.get_fields(request, obj)}),
                ("Test a request (with this page's unsaved changes; nothing is saved)",
                 {"fields": list(admin_trial.TRY_FIELDS)})]

    @admin.display(description="What this grant matches")
    def what_this_matches(self, obj):
        if obj is None or obj.pk is None:
            return "Save the grant to see a preview."
        # The saved grant, read again: after a test or a refused save, `obj` holds the form's raw text.
        obj = Grant.objects.select_related("worker", "secret").filter(pk=obj.pk).first()
        if obj is None:
            return "Save the grant to see a preview."
        rule = GrantRule.from_model(obj)
        rows = format_html_join("", "<li>{} <code>{}</code></li>",
                                (("✓ matches" if ok else "✗ does not match", url)
                                 for url, ok in preview.examples(rule)))
        worker = obj.worker.name if obj.worker_id else None
        notes = []
        missing = preview.missing_example_headers(rule)
        if missing:
            notes.append(f"No example value was found for the pattern of {', '.join(missing)}: the examples "
                         "are sent without it.")
        warning = preview.private_literal_warning(rule)
        warned = format_html('<p class="private-literal-warning" id="private-literal-warning" role="note">'
                             "⚠ {}</p>", warning) if warning else ""
        noted = format_html_join("", "<p>{}</p>", ((n,) for n in notes))
        return format_html("{}<p>{}</p>{}<ul>{}</ul>", warned, preview.describe(rule, worker), noted, rows)

    def save_model(self, request, obj, form, change):
        grant, _action = grant_save(form.spec, actor=request.user.get_username(), via="admin")
        obj.pk, obj.created_at, obj.updated_at = grant.pk, grant.created_at, grant.updated_at
        # Saved as asked (the grant is policy); the warning says the gateway will not dial it yet.
        warning = preview.private_literal_warning(GrantRule.from_model(grant), fresh=True)
        if warning:
            messages.warning(request, warning)

    def delete_model(self, request, obj):
        grant_delete(obj, actor=request.user.get_username(), via="admin")

    def delete_queryset(self, request, queryset):
        GRANT_EDITS.delete_all(queryset.select_related("worker", "secret"), by=request.user.get_username(),
                               via="admin")
