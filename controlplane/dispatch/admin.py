"""Starting and cancelling runs from the Run admin. Installed into controlplane.fleet.admin.RunAdmin when
the admin discovers this app (fleet knows nothing of dispatch): two changelist actions (cancel, start
again) and a "start a run" form at admin/fleet/run/start/. Starting needs fleet.add_run, cancelling
fleet.change_run (Admins have both); a run started here is filed by the signed-in person, so budgets
never hold it back (budgets gate proactive runs only)."""

from __future__ import annotations

import shlex

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from controlplane.core.errors import RosterError
from controlplane.dispatch.cancelling import run_cancel
from controlplane.dispatch.starting import run_start, run_start_agent
from controlplane.fleet.admin import RunAdmin
from controlplane.fleet.models import Run, Worker


def _who(request) -> str:
    return request.user.get_username()


@admin.action(description="Cancel selected live runs", permissions=["dispatch_cancel"])
def cancel_runs(modeladmin, request, queryset):
    cancelled = 0
    for run in queryset.filter(status__in=Run.LIVE_STATUSES):
        try:
            run_cancel(run.pk, by=_who(request))
            cancelled += 1
        except RosterError as exc:  # it ended meanwhile
            modeladmin.message_user(request, f"run {run.pk}: {exc}", messages.WARNING)
    modeladmin.message_user(request, f"cancelled {cancelled} run(s)")


@admin.action(description="Start again (same worker, command and timeout)", permissions=["dispatch_start"])
def start_again(modeladmin, request, queryset):
    for run in queryset.select_related("worker"):
        try:
            new = run_start(run.worker, run.command, proactive=False, timeout=run.timeout_seconds,
                            filed_by=request.user, task=run.task)
        except RosterError as exc:
            modeladmin.message_user(request, f"run {run.pk}: {exc}", messages.ERROR)
            continue
        modeladmin.message_user(request, f"started run {new.pk} ({new.status}) from run {run.pk}")


class RunStartForm(forms.Form):
    worker = forms.ModelChoiceField(queryset=Worker.objects.filter(active=True))
    task = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                           help_text="a task for the worker's agent (its preset, Agents → Worker agents)")
    command = forms.CharField(required=False,
                              help_text="or a command, split like a shell would, e.g. python3 -m agent "
                                        "--task 'tidy up'")
    timeout = forms.IntegerField(min_value=1, required=False, help_text="seconds; empty: the default")

    def clean_command(self):
        try:
            return shlex.split(self.cleaned_data.get("command") or "")
        except ValueError as exc:
            raise forms.ValidationError(f"cannot split the command: {exc}") from exc

    def clean(self):
        cleaned = super().clean()
        task, command = (cleaned.get("task") or "").strip(), cleaned.get("command")
        if "command" in cleaned and bool(task) == bool(command):
            raise forms.ValidationError("give either a task for the worker's agent or a command")
        cleaned["task"] = task
        return cleaned


def start_view(modeladmin, request):
    if not modeladmin.has_dispatch_start_permission(request):
        raise PermissionDenied
    form = RunStartForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            if data["task"]:
                run = run_start_agent(data["worker"], data["task"], proactive=False, timeout=data["timeout"],
                                      filed_by=request.user)
            else:
                run = run_start(data["worker"], data["command"], proactive=False, timeout=data["timeout"],
                                filed_by=request.user)
        except RosterError as exc:
            form.add_error(None, str(exc))
        else:
            modeladmin.message_user(request, f"started run {run.pk} ({run.status})")
            return redirect(reverse("admin:fleet_run_change", args=[run.pk]))
    context = {**modeladmin.admin_site.each_context(request), "form": form, "opts": modeladmin.model._meta,
               "title": "Start a run"}
    return TemplateResponse(request, "dispatch/admin_start.html", context)


def has_dispatch_cancel_permission(modeladmin, request) -> bool:
    return request.user.has_perm("fleet.change_run")


def has_dispatch_start_permission(modeladmin, request) -> bool:
    return request.user.has_perm("fleet.add_run")


def install(admin_class) -> None:
    """Add the actions, their permission checks and the start form's URL to the Run admin."""
    admin_class.actions = [*(admin_class.actions or []), cancel_runs, start_again]
    admin_class.has_dispatch_cancel_permission = has_dispatch_cancel_permission
    admin_class.has_dispatch_start_permission = has_dispatch_start_permission
    original_get_urls = admin_class.get_urls

    def get_urls(self):
        start = path("start/", self.admin_site.admin_view(lambda request: start_view(self, request)),
                     name="fleet_run_start")
        return [start, *original_get_urls(self)]

    admin_class.get_urls = get_urls


install(RunAdmin)
