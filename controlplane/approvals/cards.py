"""Held requests as an approver sees them, masked for display: the cards of the web queue, a run's
page and the `approval list` command."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models.functions import Coalesce
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.approvals.selectors import open_windows
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Run
from controlplane.vault.masking import known_sentinels, mask_headers, mask_text, visible


@dataclass(frozen=True)
class ApprovalCard:
    """One held request as an approver sees it (already masked)."""

    id: str
    status: str
    worker: str
    run_id: int
    method: str
    url: str
    headers: list[tuple[str, str]]
    bound_headers: frozenset[str]  # names bound to an approval (a replay must carry the same values)
    body_preview: str
    body_size: int | None
    body_sha256: str
    grant_slug: str
    # Why the grant asks, in its admin's words (the grant's description): what the approver weighs.
    grant_description: str
    taint: str
    untrusted: bool
    created_at: datetime
    expires_at: datetime
    seconds_left: int
    decided_by: str = ""
    channel: str = ""
    comment: str = ""
    # The gateway stopped holding the request: an approval now only lets an identical retry through.
    abandoned: bool = False
    # The run is over: nothing could use an approval, so it cannot be given.
    run_ended: bool = False
    # Until when the box itself waits (the gateway's hold), apart from how long the approval can be given:
    # approved after this, only an identical retry passes (within the grace).
    box_waits_until: datetime | None = None
    box_seconds_left: int = 0
    # A time-boxed approval: until when identical requests of the worker pass (None: none, or revoked).
    window_until: datetime | None = None
    # Closed without a decision because its run ended (the sweep): why, in words.
    closed_why: str = ""


def _card(approval: Approval, sentinels: dict[str, str], now: datetime) -> ApprovalCard:
    req = approval.request if isinstance(approval.request, dict) else {}
    run = approval.run
    box_until = min(approval.expires_at,
                    approval.created_at + timedelta(seconds=settings.ROSTER_APPROVAL_HOLD_SECONDS))
    return ApprovalCard(
        id=str(approval.id),
        status=(Approval.Status.EXPIRED if approval.status == Approval.Status.PENDING
                and approval.expires_at <= now else approval.status),
        worker=run.worker.name,
        run_id=run.pk,
        method=visible(str(req.get("method", ""))),
        url=mask_text(str(req.get("url", "")), sentinels),
        headers=mask_headers(req.get("headers") or [], sentinels),
        bound_headers=frozenset(str(n) for n in req.get("bound_headers") or ()),
        body_preview=mask_text(str(req.get("body_preview", "")), sentinels),
        body_size=req.get("body_size"),
        body_sha256=str(req.get("body_sha256", "")),
        grant_slug=approval.grant_slug,
        grant_description=visible(approval.grant.description) if approval.grant_id else "",
        taint=DataClass(run.taint).label,
        untrusted=run.untrusted,
        created_at=approval.created_at,
        expires_at=approval.expires_at,
        seconds_left=max(0, int((approval.expires_at - now).total_seconds())),
        decided_by=approval.decided_by.get_username() if approval.decided_by_id else "",
        channel=approval.channel,
        comment=mask_text(approval.comment, sentinels),
        abandoned=approval.abandoned_at is not None,
        run_ended=not run.is_live,
        box_waits_until=box_until,
        box_seconds_left=0 if approval.abandoned_at else max(0, int((box_until - now).total_seconds())),
        window_until=None if approval.window_revoked_at else approval.window_until,
        closed_why=approval.closed_why,
    )


@dataclass(frozen=True)
class QueueFilter:
    """The queue narrowed to one worker (by name) and/or one run: the queue page's `?worker=` and `?run=`
    (linked from each card), kept by the live list it fetches again on every change."""

    worker: str = ""
    run_id: int | None = None

    def __bool__(self) -> bool:
        return bool(self.worker or self.run_id is not None)

    def apply(self, qs, run_field: str = "run"):
        """`run_field`: how the rows name their run ("run" for approvals; proposals have run and worker)."""
        if self.worker:
            qs = qs.filter(**{f"{run_field}__worker__name": self.worker})
        if self.run_id is not None:
            qs = qs.filter(**{f"{run_field}_id": self.run_id})
        return qs


ALL = QueueFilter()


def pending_approval_cards(now: datetime | None = None, only: QueueFilter = ALL) -> list[ApprovalCard]:
    """Pending and not yet past their expiry (the sweeper may lag; an expired one is not decidable)."""
    now = now or timezone.now()
    sentinels = known_sentinels()
    qs = (only.apply(Approval.objects.filter(status=Approval.Status.PENDING, expires_at__gt=now))
          .select_related("run__worker", "decided_by", "grant").order_by("created_at"))
    return [_card(a, sentinels, now) for a in qs]


def recent_decided_cards(limit: int, now: datetime | None = None,
                         only: QueueFilter = ALL) -> list[ApprovalCard]:
    now = now or timezone.now()
    sentinels = known_sentinels()
    # Expired ones stay here as expired (decided_at is empty for them: they end at their expiry), including
    # pending ones past expiry that the sweep has not marked yet.
    qs = (only.apply(Approval.objects.exclude(status=Approval.Status.PENDING, expires_at__gt=now))
          .annotate(ended_at=Coalesce("decided_at", "expires_at"))
          .select_related("run__worker", "decided_by", "grant").order_by("-ended_at", "-created_at")[:limit])
    return [_card(a, sentinels, now) for a in qs]


def approval_cards(*, status: str | None = None, limit: int = 50,
                   only: QueueFilter = ALL) -> list[ApprovalCard]:
    """Newest first, masked as on the queue page (the command line's `approval list`)."""
    now = timezone.now()
    sentinels = known_sentinels()
    qs = only.apply(Approval.objects.select_related("run__worker", "decided_by", "grant"))
    qs = qs.order_by("-created_at")
    if status:
        qs = qs.filter(status=status)
    return [_card(a, sentinels, now) for a in qs[:limit]]


def approval_cards_for_run(run: Run) -> list[ApprovalCard]:
    now = timezone.now()
    sentinels = known_sentinels()
    qs = run.approvals.select_related("run__worker", "decided_by", "grant").order_by("created_at")
    return [_card(a, sentinels, now) for a in qs]


def open_window_cards(now: datetime | None = None, only: QueueFilter = ALL) -> list[ApprovalCard]:
    """The time-boxed approvals whose window is open, soonest to end first (the queue offers to revoke)."""
    now = now or timezone.now()
    sentinels = known_sentinels()
    return [_card(a, sentinels, now) for a in only.apply(open_windows(now))]


def approval_card(approval: Approval, now: datetime | None = None) -> ApprovalCard:
    """One held request as an approver sees it (masked): the approval post in chat quotes this."""
    return _card(approval, known_sentinels(), now or timezone.now())
