"""Deciding a proposal from the approval queue. Thin: the service checks the permission again, audits,
and starts the executor after the commit."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from controlplane.proposals import services
from controlplane.proposals.models import Proposal
from controlplane.web.security import hardened


@require_POST
@hardened
@login_required
def proposal_decide_view(request: HttpRequest, proposal_id) -> HttpResponse:
    if not request.user.has_perm(services.DECIDE_PERMISSION):
        raise PermissionDenied("you are not an approver")
    action = request.POST.get("action", "")
    if action not in ("approve", "deny"):
        return HttpResponse("action must be approve or deny", status=400, content_type="text/plain")
    reason = request.POST.get("reason", "")
    if len(reason) > services.MAX_REASON:
        return HttpResponse("reason is too long", status=400, content_type="text/plain")
    if not Proposal.objects.filter(pk=proposal_id).exists():
        raise Http404("no such proposal")
    try:
        proposal = services.proposal_decide(
            proposal_id, request.user, approve=action == "approve", channel="web", reason=reason
        )
    except services.ProposalClosed:
        messages.warning(request, "That proposal was already decided or has expired; nothing changed.")
        return redirect("web:approvals")
    messages.success(request, f"Proposal {proposal.pk} from run {proposal.run_id}: {proposal.status}.")
    return redirect("web:approvals")
