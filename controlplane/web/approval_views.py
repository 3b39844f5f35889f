"""The approval queue pages. Views stay thin: reads from controlplane.web.selectors, the decision from
controlplane.approvals.services.approval_decide (which checks the permission again and audits)."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from controlplane.approvals import services
from controlplane.approvals.cards import (
    QueueFilter,
    open_window_cards,
    pending_approval_cards,
    recent_decided_cards,
)
from controlplane.approvals.models import Approval
from controlplane.core.timefmt import when_text
from controlplane.proposals.selectors import pending_proposal_cards, recent_proposal_cards
from controlplane.vault.masking import known_sentinels, mask_text
from controlplane.web.security import hardened

VIEW_PERM = "approvals.view_approval"
DECIDE_PERM = "approvals.decide_approval"


class BadFilter(ValueError):
    """A `?run=` that is no run id, or a `?worker=` no worker could be named."""


def queue_filter(request: HttpRequest) -> QueueFilter:
    """`?worker=NAME` and `?run=ID`, as the cards link them. A malformed value is a 400, never a silently
    unfiltered queue (an approver who asked for one run must not be shown every run's requests)."""
    worker = request.GET.get("worker", "").strip()
    run = request.GET.get("run", "").strip()
    if len(worker) > 64 or any(not (ch.isalnum() or ch in "-_") for ch in worker):
        raise BadFilter("worker must be a worker's name")
    if run and not (run.isascii() and run.isdigit() and len(run) < 19):
        raise BadFilter("run must be a run's number")
    return QueueFilter(worker=worker, run_id=int(run) if run else None)


def filter_query(only: QueueFilter) -> str:
    return urlencode({k: v for k, v in (("worker", only.worker), ("run", only.run_id or "")) if v})


def _queue_context(request: HttpRequest) -> dict:
    only = queue_filter(request)
    return {
        "only": only,
        "filter_query": filter_query(only),
        "cards": pending_approval_cards(only=only),
        "recent": recent_decided_cards(settings.ROSTER_WEB_RECENT_DECISIONS, only=only),
        "can_decide": request.user.has_perm(DECIDE_PERM),
        "deny_comment_required": settings.ROSTER_APPROVAL_DENY_COMMENT_REQUIRED,
        "comment_max": settings.ROSTER_APPROVAL_COMMENT_MAX_CHARS,
        "grace_seconds": settings.ROSTER_APPROVAL_GRACE_SECONDS,
        "window_choices": services.window_choices(),
        "windows": open_window_cards(only=only),
        "proposals": pending_proposal_cards(only=only),
        "recent_proposals": recent_proposal_cards(settings.ROSTER_WEB_RECENT_DECISIONS, only=only),
    }


def _bad_filter(exc: BadFilter) -> HttpResponse:
    return HttpResponse(f"{exc}", status=400, content_type="text/plain")


@require_GET
@hardened
@login_required
@permission_required(VIEW_PERM, raise_exception=True)
def approval_queue(request: HttpRequest) -> HttpResponse:
    try:
        return render(request, "approvals/queue.html", _queue_context(request))
    except BadFilter as exc:
        return _bad_filter(exc)


@require_GET
@hardened
@login_required
@permission_required(VIEW_PERM, raise_exception=True)
def approval_queue_fragment(request: HttpRequest) -> HttpResponse:
    """The queue's list alone, fetched by the page when the websocket says something changed (with the
    page's filter: the page's list URL carries it)."""
    try:
        return render(request, "approvals/_queue_list.html", _queue_context(request))
    except BadFilter as exc:
        return _bad_filter(exc)


def back_to_queue(request: HttpRequest) -> HttpResponse:
    """Back to the queue as the approver was looking at it: the decide form's action carries the page's
    filter; one that does not parse is dropped (the decision is already made)."""
    try:
        only = queue_filter(request)
    except BadFilter:
        only = QueueFilter()
    query = filter_query(only)
    return redirect(reverse("web:approvals") + (f"?{query}" if query else ""))


@require_POST
@hardened
@login_required
def approval_decide_view(request: HttpRequest, approval_id) -> HttpResponse:
    # Checked here for a clear 403 before touching anything; approval_decide checks again.
    if not request.user.has_perm(DECIDE_PERM):
        raise PermissionDenied("you are not an approver")
    action = request.POST.get("action", "")
    if action not in ("approve", "deny"):
        return HttpResponse("action must be approve or deny", status=400, content_type="text/plain")
    if not Approval.objects.filter(pk=approval_id).exists():
        raise Http404("no such approval")
    try:
        approval = services.approval_decide(approval_id, request.user, approve=action == "approve",
                                            channel="web", comment=request.POST.get("comment", ""),
                                            window_minutes=request.POST.get("window_minutes", "")
                                            if action == "approve" else 0)
    except (services.ApprovalCommentInvalid, services.ApprovalWindowInvalid) as exc:
        messages.error(request, f"Nothing changed: {exc}.")
        return back_to_queue(request)
    except services.ApprovalClosed as exc:
        text = ("That request's run has ended, so it cannot be approved; nothing changed."
                if "run" in str(exc) else "That request was already decided or has expired; nothing changed.")
        messages.warning(request, text)
        return back_to_queue(request)
    messages.success(request, decision_confirmation(approval))
    return back_to_queue(request)


@require_POST
@hardened
@login_required
def approval_window_revoke_view(request: HttpRequest, approval_id) -> HttpResponse:
    """End a time-boxed approval early (approval_window_revoke checks the permission again, audits)."""
    if not request.user.has_perm(DECIDE_PERM):
        raise PermissionDenied("you are not an approver")
    if not Approval.objects.filter(pk=approval_id).exists():
        raise Http404("no such approval")
    try:
        approval = services.approval_window_revoke(approval_id, request.user)
    except services.ApprovalClosed:
        messages.warning(request, "That time box had already ended or been revoked; nothing changed.")
        return back_to_queue(request)
    messages.success(request, f"Revoked: identical {_method_and_where(approval)} requests of "
                              f"{approval.run.worker.name} ask for approval again from now on.")
    return back_to_queue(request)


def _method_and_where(approval: Approval) -> str:
    """Method, host[:port] and path, as a person names the request."""
    req = approval.request if isinstance(approval.request, dict) else {}
    parts = urlsplit(str(req.get("url", "")))
    # The host as the request named it, port included (":18093" is a different service); no userinfo.
    host = parts.netloc.rpartition("@")[2] or "?"
    return f"{req.get('method', '?')} " + mask_text(f"{host}{parts.path or '/'}", known_sentinels())


def request_in_words(approval: Approval) -> str:
    """The request as a person names it, and whose (worker and run)."""
    return f"{_method_and_where(approval)} for {approval.run.worker.name} (run {approval.run_id})"


def decision_confirmation(approval: Approval) -> str:
    """The request in words (method, host[:port], path), with the verb of the button that was pressed."""
    verb = "Approved" if approval.status == Approval.Status.APPROVED else "Denied"
    text = f"{verb} {request_in_words(approval)}"
    if approval.window_until:
        text += (f"; identical requests of {approval.run.worker.name} pass without asking until "
                 f"{when_text(approval.window_until)}")
    return text + (f", with the comment: {approval.comment}" if approval.comment else ".")
