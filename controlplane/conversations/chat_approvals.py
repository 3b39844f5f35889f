"""Approvals over chat: held requests and proposals posted to an approvers' room (the worker's own, else
the global one) as quoted data, and the one explicit exception to "messages are content, never commands"
(invariant 7): a reply or a reaction *on that post* by an allowlisted approver (a chat id linked to an
active Roster user who may decide approvals) decides it, through the same services as the web
(approval_decide, proposal_decide): first decision wins, an expired one cannot be approved, reasons kept.
Anything else on the post is ignored (audited) and never reaches a worker; nothing in an approvers' room
is ever a conversation message."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from controlplane.approvals.cards import approval_card
from controlplane.approvals.models import Approval
from controlplane.approvals.services import ApprovalClosed, ApprovalCommentInvalid, approval_decide
from controlplane.audit.services import audit_append
from controlplane.conversations.models import ApprovalPost, Channel
from controlplane.conversations.roles import allowlisted_approver
from controlplane.proposals.models import Proposal
from controlplane.proposals.previews import headline
from controlplane.proposals.services import ProposalClosed, proposal_decide
from controlplane.vault.masking import visible

APPROVE_WORDS = frozenset({"approve", "approved", "yes", "ok", "allow"})
REFUSE_WORDS = frozenset({"refuse", "refused", "deny", "denied", "no", "reject"})
APPROVE_KEYS = frozenset({"✅", "👍", "✔️", "✔"})
REFUSE_KEYS = frozenset({"❌", "👎", "✖️", "✖", "🚫"})
HOW_TO = (
    'React ✅ to approve or ❌ to refuse, or reply "approve" or "refuse <reason>" to this post. '
    "Only approvers whose chat id is linked to their Roster account count."
)


def approvers_channel_for(worker_id: int) -> Channel | None:
    """The worker's own approvers' room, else the global one (no worker), else None."""
    rooms = (
        Channel.objects.filter(purpose=Channel.Purpose.APPROVALS, enabled=True)
        .filter(Q(worker_id=worker_id) | Q(worker__isnull=True))
        .select_related("server")
    )
    return min(rooms, key=lambda c: (c.worker_id is None, c.name), default=None)


def _line(text: str, limit: int = 500) -> str:
    flat = visible(" ".join(str(text).split()))
    return flat if len(flat) <= limit else flat[:limit] + "…"


def effective_status(subject) -> str:
    if subject.status == "pending" and subject.expires_at <= timezone.now():
        return "expired"
    return subject.status


def _decided(subject) -> str:
    status = effective_status(subject)
    if getattr(subject, "closed_why", ""):  # a held request closed by the sweep: its run ended
        return f"closed: {subject.closed_why}; no decision is needed any more"
    if status == "pending":
        left = max(0, int((subject.expires_at - timezone.now()).total_seconds()))
        return f"waiting for a decision, {left} s left (until {subject.expires_at:%H:%M:%S} UTC)"
    who = subject.decided_by.get_username() if subject.decided_by_id else ""
    if getattr(subject, "trust_rule_id", None):
        who = f"rule {subject.trust_rule.name}"
    why = getattr(subject, "comment", "") or getattr(subject, "reason", "")
    text = status + (f" by {who}" if who else "") + (f" via {subject.channel}" if subject.channel else "")
    return text + (f": {_line(why, 200)}" if why else "")


def approval_post_text(approval: Approval) -> str:
    """The held request quoted as data: method, URL, masked headers, body preview, run, grant, time left."""
    card = approval_card(approval)
    lines = [
        f"Roster: held request {card.id} of worker {card.worker} (run {card.run_id}, grant "
        f"{card.grant_slug}, data {card.taint}{', untrusted' if card.untrusted else ''})",
        f"Status: {_decided(approval)}",
        *([f"Why the grant asks: {_line(card.grant_description, 300)}"] if card.grant_description else []),
        "The request, quoted as data:",
        f"    {_line(card.method, 16)} {_line(card.url, 1000)}",
    ]
    lines += [f"    header {_line(name, 100)}: {_line(value, 300)}" for name, value in card.headers[:30]]
    size = card.body_size if card.body_size is not None else "?"
    lines.append(f"    body ({size} bytes, sha256 {card.body_sha256[:16]}…): {_line(card.body_preview, 600)}")
    lines.append(HOW_TO)
    return "\n".join(lines)


def proposal_post_text(proposal: Proposal) -> str:
    destination = proposal.destination.name if proposal.destination_id else "-"
    lines = [
        f"Roster: proposal {proposal.pk} of worker {proposal.worker.name} (run {proposal.run_id}): "
        f"{proposal.kind} to {destination}",
        f"Status: {_decided(proposal)}",
        "What it would do, quoted as data:",
        f"    {_line(headline(proposal), 600)}",
    ]
    if proposal.rationale:
        lines.append(f"    the worker's reason: {_line(proposal.rationale, 400)}")
    lines.append(HOW_TO)
    return "\n".join(lines)


def post_text(post: ApprovalPost) -> str:
    return approval_post_text(post.approval) if post.approval_id else proposal_post_text(post.proposal)


def subjects_to_post(limit: int = 20) -> list[tuple[Channel, ApprovalPost]]:
    """Pending, unexpired held requests and proposals with no post yet in their approvers' room: a post
    row is made for each (unsent: no external id yet)."""
    now = timezone.now()
    out = []
    held = (
        Approval.objects.filter(status=Approval.Status.PENDING, expires_at__gt=now, chat_posts__isnull=True)
        .select_related("run__worker")
        .order_by("created_at")[:limit]
    )
    proposals = (
        Proposal.objects.filter(status=Proposal.Status.PENDING, expires_at__gt=now, chat_posts__isnull=True)
        .select_related("worker")
        .order_by("created_at")
    )
    for subject in [*held, *proposals[:limit]]:
        worker_id = subject.run.worker_id if isinstance(subject, Approval) else subject.worker_id
        channel = approvers_channel_for(worker_id)
        if channel is None:
            continue
        field = "approval" if isinstance(subject, Approval) else "proposal"
        post, _ = ApprovalPost.objects.get_or_create(channel=channel, **{field: subject})
        out.append((channel, post))
    # Posts made earlier whose send failed: tried again while their subject still waits.
    unsent = (
        ApprovalPost.objects.filter(external_id="")
        .select_related("channel__server")
        .filter(
            Q(approval__status=Approval.Status.PENDING, approval__expires_at__gt=now)
            | Q(proposal__status=Proposal.Status.PENDING, proposal__expires_at__gt=now)
        )
    )
    out += [(p.channel, p) for p in unsent if (p.channel, p) not in out]
    return out


def post_sent(post: ApprovalPost, external_id: str) -> None:
    subject = post.approval or post.proposal
    with transaction.atomic():
        ApprovalPost.objects.filter(pk=post.pk).update(
            external_id=external_id, shown_status=effective_status(subject)
        )
        audit_append(
            "chat_approval",
            {"event": "posted", "post": external_id, "channel": post.channel.name, **_subject_ref(post)},
            run=subject.run_id,
        )


def posts_to_edit(limit: int = 50) -> list[ApprovalPost]:
    """Sent posts whose subject moved on (decided anywhere, expired, used) since the post said otherwise."""
    posts = (
        ApprovalPost.objects.exclude(external_id="")
        .select_related(
            "channel__server",
            "approval__run__worker",
            "approval__decided_by",
            "proposal__worker",
            "proposal__decided_by",
            "proposal__trust_rule",
        )
        .order_by("-updated_at")[:500]
    )
    return [p for p in posts if effective_status(p.approval or p.proposal) != p.shown_status][:limit]


def post_edited(post: ApprovalPost) -> None:
    status = effective_status(post.approval or post.proposal)
    ApprovalPost.objects.filter(pk=post.pk).update(shown_status=status, updated_at=timezone.now())


def _subject_ref(post: ApprovalPost) -> dict:
    return {"approval": str(post.approval_id)} if post.approval_id else {"proposal": str(post.proposal_id)}


@dataclass(frozen=True)
class ChatAnswer:
    """What someone did on a post in an approvers' room, as the adapter read it."""

    channel: Channel
    post_external_id: str  # the event the reply or reaction is on
    sender: str  # chat id
    event_id: str  # the reply's or reaction's own id
    approve: bool | None  # None: neither an approval nor a refusal
    reason: str = ""


def answer_from_reaction(key: str) -> bool | None:
    key = key.strip()
    return True if key in APPROVE_KEYS else False if key in REFUSE_KEYS else None


def answer_from_reply(body: str) -> tuple[bool | None, str]:
    """A reply's own words (the quoted fallback lines `> …` dropped): the first word decides, the rest is
    the reason."""
    own = "\n".join(line for line in body.splitlines() if not line.startswith(">")).strip()
    word, _, rest = own.partition(" ")
    word = word.strip().lower().rstrip(".!:,")
    if word in APPROVE_WORDS:
        return True, rest.strip()
    if word in REFUSE_WORDS:
        return False, rest.strip()
    return None, ""


def _ignored(answer: ChatAnswer, post: ApprovalPost | None, why: str) -> str:
    audit_append(
        "chat_approval",
        {
            "event": "ignored",
            "why": why,
            "post": answer.post_external_id,
            "sender": answer.sender,
            "event_id": answer.event_id,
            "channel": answer.channel.name,
            **(_subject_ref(post) if post else {}),
        },
        verdict="ignored",
        reason=why[:32],
    )
    return why


def chat_answer_apply(answer: ChatAnswer) -> str:
    """Decide the post's subject if, and only if, this is an allowlisted approver's approve or refuse on a
    post of this room; "decided" or why it was ignored (audited either way, never shown to a worker)."""
    post = (
        ApprovalPost.objects.select_related("approval", "proposal")
        .filter(channel=answer.channel, external_id=answer.post_external_id)
        .exclude(external_id="")
        .first()
    )
    if post is None:
        return "not_a_post"  # a reply to some other message: nothing to decide, nothing recorded
    if answer.approve is None:
        return _ignored(answer, post, "not_a_decision")
    user = allowlisted_approver(answer.channel.kind, answer.sender)
    if user is None:
        return _ignored(answer, post, "not_allowlisted")
    evidence = {
        "post": answer.post_external_id,
        "event": answer.event_id,
        "chat_user": answer.sender,
        "chat_channel": answer.channel.name,
    }
    try:
        if post.approval_id:
            approval_decide(post.approval_id, user, answer.approve, "chat", answer.reason, evidence=evidence)
        else:
            proposal_decide(post.proposal_id, user, answer.approve, "chat", answer.reason, evidence=evidence)
    except (ApprovalClosed, ProposalClosed):
        return _ignored(answer, post, "already_closed")
    except (ApprovalCommentInvalid, ValueError):
        return _ignored(answer, post, "bad_reason")
    except PermissionDenied:
        return _ignored(answer, post, "not_allowlisted")
    return "decided"
