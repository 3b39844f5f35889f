"""Destinations and earned-trust rules in the admin: the destination form runs the shared validator
(controlplane.proposals.validation) and shows its messages on the fields they name; saves and deletes go
through the audited services. Proposals are read-only here (decided in the approval queue or the CLI)."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin

from controlplane.core.admin import ReadOnlyAdmin
from controlplane.core.errors import ValidationFailed
from controlplane.core.taint import DataClass
from controlplane.proposals import services
from controlplane.proposals.models import Destination, Proposal, TrustRule
from controlplane.proposals.services.configuring import (
    DESTINATION_EDITS,
    TRUST_RULE_EDITS,
    trust_rule_expiry_problem,
)
from controlplane.proposals.validation import (
    DEFAULTS,
    KIND_KEYS,
    PROPOSAL_KIND_FOR_DESTINATION,
    validate_destination,
)

_LIST_FIELDS = ("allowed_recipients", "protected_branches")


class DestinationForm(forms.ModelForm):
    headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='webhook: JSON object of header names to values, e.g. {"X-Source": "roster"}',
    )
    allowed_recipients = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="smtp: one address or @domain per line",
    )
    protected_branches = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="git: one branch or pattern per line",
    )

    class Meta:
        model = Destination
        fields = [
            "name",
            "kind",
            "description",
            "enabled",
            "secret",
            "max_taint",
            "cost_micro",
            "daily_limit",
            "url",
            "method",
            "headers",
            "secret_header",
            "secret_format",
            "smtp_host",
            "smtp_port",
            "starttls",
            "login",
            "from_address",
            "allowed_recipients",
            "branch_pattern",
            "protected_branches",
        ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["headers"] = json.dumps(self.instance.headers or {})
            for name in _LIST_FIELDS:
                self.initial[name] = "\n".join(getattr(self.instance, name) or [])
        self.spec = None

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        name = cleaned.get("name") or self.instance.name
        kind = cleaned.get("kind") or self.instance.kind or ""
        data: dict = {
            "kind": kind,
            "description": cleaned.get("description", ""),
            "enabled": bool(cleaned.get("enabled")),
            "cost_micro": cleaned.get("cost_micro") or 0,
            "daily_limit": cleaned.get("daily_limit") or 0,
            "max_taint": DataClass(int(cleaned.get("max_taint") or 1)).label,
        }
        if cleaned.get("secret") is not None:
            data["secret"] = cleaned["secret"].name
        try:
            headers = json.loads(cleaned.get("headers") or "{}")
        except ValueError:
            self.add_error("headers", "not valid JSON")
            return cleaned
        wanted = KIND_KEYS.get(kind, frozenset())
        form_values = {"headers": headers, "starttls": bool(cleaned.get("starttls"))}
        for key in _LIST_FIELDS:
            form_values[key] = [x.strip() for x in (cleaned.get(key) or "").splitlines() if x.strip()]
        for key in wanted:
            value = form_values.get(key, cleaned.get(key))
            if value not in (None, "", [], {}) or key == "starttls":
                data[key] = value
        # A field of another kind filled in was dropped without a word (an smtp_host on a webhook): say so.
        # Defaults the add form shows pre-filled (port 587, POST) are not the admin's input; the STARTTLS
        # checkbox is always some value, so it is not judged.
        for key in sorted(set().union(*KIND_KEYS.values()) - wanted - {"starttls"}):
            value = form_values.get(key, cleaned.get(key))
            if value not in (None, "", [], {}) and value != DEFAULTS.get(key) and key in self.fields:
                self.add_error(key, f"a {kind} destination has no {key}: leave it empty (it would not be "
                                    "used)")
        try:
            self.spec = validate_destination(data, name=name)
        except ValidationFailed as exc:
            for field, message in exc.errors.items():
                self.add_error(field if field in self.fields else None, message)
        return cleaned


@admin.register(Destination)
class DestinationAdmin(admin.ModelAdmin):
    form = DestinationForm
    list_display = [
        "name",
        "kind",
        "enabled",
        "url",
        "smtp_host",
        "secret",
        "max_taint",
        "cost_micro",
        "daily_limit",
    ]
    list_filter = ["kind", "enabled"]
    search_fields = ["name", "description", "url", "smtp_host"]

    def get_readonly_fields(self, request, obj=None):
        # The name is the file id and the box's word for it; the kind decides which fields exist.
        return ["name", "kind"] if obj is not None else []

    def get_fields(self, request, obj=None):
        fields = super().get_fields(request, obj)
        if obj is None:
            return fields  # adding: every kind's fields, each saying which kind it is for
        other = set().union(*KIND_KEYS.values()) - KIND_KEYS[obj.kind]
        # Changing: only the fields of its kind, under the name and kind (read-only, else listed last).
        return ["name", "kind", *(f for f in fields if f not in other and f not in ("name", "kind"))]

    def save_model(self, request, obj, form, change):
        dest, _action = services.destination_save(
            form.spec, actor=request.user.get_username(), via="admin"
        )
        obj.pk, obj.created_at, obj.updated_at = dest.pk, dest.created_at, dest.updated_at

    def delete_model(self, request, obj):
        services.destination_delete(obj, actor=request.user.get_username(), via="admin")

    def delete_queryset(self, request, queryset):
        DESTINATION_EDITS.delete_all(queryset.select_related("secret"), by=request.user.get_username(),
                                     via="admin")


class TrustRuleForm(forms.ModelForm):
    class Meta:
        model = TrustRule
        fields = ["name", "worker", "destination", "kind", "max_per_day", "expires_at", "enabled"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Identity edits always need a human: the choice is not even offered.
        self.fields["kind"].choices = [
            c for c in self.fields["kind"].choices if c[0] != Proposal.Kind.IDENTITY_EDIT
        ]

    def clean(self):
        cleaned = super().clean()
        kind, dest = cleaned.get("kind"), cleaned.get("destination")
        if kind and dest is not None and kind != PROPOSAL_KIND_FOR_DESTINATION[dest.kind]:
            self.add_error(
                "kind",
                f"a {dest.kind} destination takes {PROPOSAL_KIND_FOR_DESTINATION[dest.kind]} proposals only",
            )
        expires_at = cleaned.get("expires_at")
        if expires_at is not None:
            probe = TrustRule(pk=self.instance.pk, expires_at=expires_at)
            expired = trust_rule_expiry_problem(probe)
            if expired:
                self.add_error("expires_at", expired)
        return cleaned


@admin.register(TrustRule)
class TrustRuleAdmin(admin.ModelAdmin):
    form = TrustRuleForm
    list_display = ["name", "worker", "destination", "kind", "max_per_day", "expires_at", "enabled"]
    list_filter = ["enabled", "kind"]

    def save_model(self, request, obj, form, change):
        # The form refuses what the service would (identity edits, a kind the destination does not take,
        # an expiry already past).
        services.trust_rule_save(obj, actor=request.user.get_username(), via="admin")

    def delete_model(self, request, obj):
        services.trust_rule_delete(obj, actor=request.user.get_username(), via="admin")

    def delete_queryset(self, request, queryset):
        TRUST_RULE_EDITS.delete_all(queryset.select_related("worker", "destination"),
                                    by=request.user.get_username(), via="admin")


@admin.register(Proposal)
class ProposalAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "worker", "kind", "destination", "status", "channel", "trust_rule"]
    list_filter = ["status", "kind", "channel"]
    search_fields = ["=id", "worker__name", "destination__name"]
    list_select_related = ["worker", "destination", "trust_rule"]
    exclude = ["payload"]  # may be large (attachments, bundles); shown as a preview in the queue
