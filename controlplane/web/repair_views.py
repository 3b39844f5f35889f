"""Repairs from the run timeline (P4: "memory corrected, records reverted, tasks requeued"; docs/memory.md,
"Repair"): forget every note a run wrote, correct them (the notes list filtered by the run), requeue its
task, revert its knowledge commits (docs/knowledge.md). Each repair names the run it repairs on the record,
through the same services as the command line (`memory forget-run`, `run requeue`, `knowledge revert-run`).
Admins only."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from controlplane.core.errors import RosterError
from controlplane.core.roles import is_admin
from controlplane.dispatch.requeue import run_requeue
from controlplane.fleet.models import Run
from controlplane.knowledge.models import Checkout, Commit
from controlplane.knowledge.services import knowledge_revert_run
from controlplane.memory.models import Note
from controlplane.memory.selectors import notes_listed
from controlplane.memory.services import notes_forget_run
from controlplane.web.memory_views import MAX_REASON, admin_only, with_expiry
from controlplane.web.security import hardened


def repair_context(run: Run, user) -> dict:
    """The timeline's repair section: what was done to repair this run, what this run repairs, and for an
    admin the actions (the rest see the lineage only)."""
    written = Note.objects.filter(written_by_run=run)
    return {
        "may": is_admin(user),
        "notes_written": written.count(),
        "notes_held": written.filter(forgotten_at__isnull=True).count(),
        "requeue_of": run.requeue_of_id,
        "requeues": list(run.requeues.order_by("id").values_list("id", flat=True)),
        "live": run.is_live,
        **knowledge_context(run),
    }


def knowledge_context(run: Run) -> dict:
    """What the run was given of its worker's knowledge and what it wrote back (issue 26.6), and what
    reverted it (docs/knowledge.md)."""
    commits = list(Commit.objects.filter(run=run).order_by("created_at", "id"))
    return {
        "checkout": Checkout.objects.filter(run=run).first(),
        "knowledge_commits": [c for c in commits if c.kind == Commit.Kind.CHANGE],
        "knowledge_reverts": [c for c in commits if c.kind == Commit.Kind.REVERT],
        "knowledge_revertable": any(c.kind == Commit.Kind.CHANGE and not c.reverted_by for c in commits),
    }


@require_http_methods(["GET", "POST"])
@hardened
@admin_only
def run_forget_notes_view(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("worker"), pk=run_id)
    held = notes_listed(run=run.pk).filter(forgotten_at__isnull=True)
    error = ""
    if request.method == "POST":
        reason = request.POST.get("reason", "").strip()
        if len(reason) > MAX_REASON:
            error = f"A reason is at most {MAX_REASON} characters."
        else:
            count = notes_forget_run(run.pk, by=request.user.get_username(), reason=reason)
            messages.success(request, f"Repair of run {run.pk}: {count} note(s) it wrote forgotten.")
            return redirect("web:run", run_id=run.pk)
    return render(
        request,
        "web/memory_confirm.html",
        {
            "title": f"Forget every note run {run.pk} wrote",
            "rows": with_expiry(held),
            "error": error,
            "what": f"every note run {run.pk} wrote ({len(held)} held)",
            "button": f"Forget all {len(held)} notes",
            "back": reverse("web:run", args=[run.pk]),
            "via": "run",
            "already": not held,
            "repairs": run.pk,
        },
        status=400 if error else 200,
    )


@require_POST
@hardened
@admin_only
def run_requeue_view(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=run_id)
    try:
        new = run_requeue(run.pk, by=request.user)
    except RosterError as exc:
        return render(
            request,
            "web/refused.html",
            {
                "title": f"Run {run.pk} was not requeued",
                "error": str(exc),
                "back": reverse("web:run", args=[run.pk]),
                "back_label": f"Back to run {run.pk}",
            },
            status=409,
        )
    messages.success(request, f"Run {new.pk} requeues run {run.pk} ({new.status}).")
    return redirect("web:run", run_id=new.pk)


@require_POST
@hardened
@admin_only
def run_revert_knowledge_view(request: HttpRequest, run_id: int) -> HttpResponse:
    """`knowledge revert-run RUN` from the timeline: one new commit, audited `repair` naming the run."""
    run = get_object_or_404(Run, pk=run_id)
    reason = request.POST.get("reason", "").strip()[:MAX_REASON]
    try:
        commit = knowledge_revert_run(run.pk, by=request.user.get_username(), reason=reason)
    except RosterError as exc:
        return render(
            request,
            "web/refused.html",
            {
                "title": f"Run {run.pk}'s knowledge commits were not reverted",
                "error": str(exc),
                "back": reverse("web:run", args=[run.pk]),
                "back_label": f"Back to run {run.pk}",
            },
            status=409,
        )
    messages.success(request, f"Repair of run {run.pk}: its knowledge commits reverted by commit "
                              f"{commit.sha[:12]}.")
    return redirect("web:run", run_id=run.pk)
