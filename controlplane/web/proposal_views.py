"""Deciding a proposal from the approval queue. Thin: the service checks the permission again, audits,
and starts the executor after the commit."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from controlplane.proposals import services
from controlplane.proposals.models import Proposal
from controlplane.proposals.previews import in_words
from controlplane.web.approval_views import back_to_queue
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
        return back_to_queue(request)
    messages.success(request, proposal_confirmation(proposal))
    return back_to_queue(request)


def proposal_confirmation(proposal: Proposal, *, retried: bool = False) -> str:
    """The decision in words: what was approved, denied or sent again, and whose (issue 27.8)."""
    verbs = {Proposal.Status.APPROVED: "Approved", Proposal.Status.REFUSED: "Denied"}
    verb = "Sent again" if retried else verbs.get(proposal.status, proposal.status.capitalize())
    text = f"{verb}: {in_words(proposal)}, for {proposal.worker.name} (run {proposal.run_id})"
    return text + (f", with the reason: {proposal.reason}" if proposal.reason and not retried else ".")


@require_POST
@hardened
@login_required
def proposal_retry_view(request: HttpRequest, proposal_id) -> HttpResponse:
    """Send a failed proposal to its executor again: the CLI's `proposal retry`, through the same
    service (which checks the permission again, audits the retry and starts the executor)."""
    if not request.user.has_perm(services.DECIDE_PERMISSION):
        raise PermissionDenied("you are not an approver")
    if not Proposal.objects.filter(pk=proposal_id).exists():
        raise Http404("no such proposal")
    try:
        proposal = services.proposal_retry(proposal_id, request.user)
    except services.ProposalClosed as exc:
        messages.warning(request, f"Nothing changed: {exc}.")
        return back_to_queue(request)
    messages.success(request, proposal_confirmation(proposal, retried=True))
    return back_to_queue(request)
