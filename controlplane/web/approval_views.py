"""The approval queue pages. Views stay thin: reads from controlplane.web.selectors, the decision from
controlplane.approvals.services.approval_decide (which checks the permission again and audits)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from controlplane.approvals import services
from controlplane.approvals.cards import pending_approval_cards, recent_decided_cards
from controlplane.approvals.models import Approval
from controlplane.proposals.selectors import pending_proposal_cards, recent_proposal_cards
from controlplane.vault.masking import known_sentinels, mask_text
from controlplane.web.security import hardened

VIEW_PERM = "approvals.view_approval"
DECIDE_PERM = "approvals.decide_approval"


def _queue_context(request: HttpRequest) -> dict:
    return {
        "cards": pending_approval_cards(),
        "recent": recent_decided_cards(settings.ROSTER_WEB_RECENT_DECISIONS),
        "can_decide": request.user.has_perm(DECIDE_PERM),
        "deny_comment_required": settings.ROSTER_APPROVAL_DENY_COMMENT_REQUIRED,
        "comment_max": settings.ROSTER_APPROVAL_COMMENT_MAX_CHARS,
        "grace_seconds": settings.ROSTER_APPROVAL_GRACE_SECONDS,
        "proposals": pending_proposal_cards(),
        "recent_proposals": recent_proposal_cards(settings.ROSTER_WEB_RECENT_DECISIONS),
    }


@require_GET
@hardened
@login_required
@permission_required(VIEW_PERM, raise_exception=True)
def approval_queue(request: HttpRequest) -> HttpResponse:
    return render(request, "approvals/queue.html", _queue_context(request))


@require_GET
@hardened
@login_required
@permission_required(VIEW_PERM, raise_exception=True)
def approval_queue_fragment(request: HttpRequest) -> HttpResponse:
    """The queue's list alone, fetched by the page when the websocket says something changed."""
    return render(request, "approvals/_queue_list.html", _queue_context(request))


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
                                            channel="web", comment=request.POST.get("comment", ""))
    except services.ApprovalCommentInvalid as exc:
        messages.error(request, f"Nothing changed: {exc}.")
        return redirect("web:approvals")
    except services.ApprovalClosed as exc:
        text = ("That request's run has ended, so it cannot be approved; nothing changed."
                if "run" in str(exc) else "That request was already decided or has expired; nothing changed.")
        messages.warning(request, text)
        return redirect("web:approvals")
    messages.success(request, decision_confirmation(approval))
    return redirect("web:approvals")


def decision_confirmation(approval: Approval) -> str:
    """The request in words (method, host[:port], path), with the verb of the button that was pressed."""
    req = approval.request if isinstance(approval.request, dict) else {}
    parts = urlsplit(str(req.get("url", "")))
    verb = "Approved" if approval.status == Approval.Status.APPROVED else "Denied"
    # The host as the request named it, port included (":18093" is a different service); no userinfo.
    host = parts.netloc.rpartition("@")[2] or "?"
    where = mask_text(f"{host}{parts.path or '/'}", known_sentinels())
    text = f"{verb} {req.get('method', '?')} {where} for {approval.run.worker.name} (run {approval.run_id})"
    return text + (f", with the comment: {approval.comment}" if approval.comment else ".")
