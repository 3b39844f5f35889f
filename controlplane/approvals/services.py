"""Approvals: opened by the decision service for `ask` grants, decided by a human (web or CLI), consumed
once by the gateway. An approval covers exactly the request it showed (method, URL, body hash)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from controlplane.approvals import broadcast, mail
from controlplane.approvals.models import Approval
from controlplane.audit.services import audit_append
from controlplane.core.errors import RosterError
from controlplane.fleet.models import Run
from controlplane.vault.redact import MASK, is_credential_name, text_for_record, url_for_record
from controlplane.vault.services import sentinel_secret_ids

DECIDE_PERMISSION = "approvals.decide_approval"


class ApprovalClosed(RosterError):
    """The approval is no longer pending (already decided, expired or used), or its run has ended."""


class ApprovalCommentInvalid(RosterError):
    """The decision's comment is missing where required, or too long."""


class ApprovalWindowInvalid(RosterError):
    """A time-boxed approval's length is not one the settings allow, or was asked for with a deny."""


def window_choices() -> list[int]:
    """The lengths (minutes) an approver may pick for "allow identical requests for N minutes": 10, 30 and
    60 up to ROSTER_APPROVAL_WINDOW_MAX_MINUTES, and that maximum itself; none while it is 0."""
    top = settings.ROSTER_APPROVAL_WINDOW_MAX_MINUTES
    return sorted({m for m in (10, 30, 60) if m <= top} | ({top} if top else set()))


def clean_window(minutes, *, approve: bool) -> int:
    """0 (this request only) or a length the settings allow; anything else is refused, not rounded."""
    if minutes in (None, "", 0, "0"):
        return 0
    try:
        value = int(minutes)
    except (TypeError, ValueError):
        raise ApprovalWindowInvalid("the time box must be a whole number of minutes") from None
    if not approve:
        raise ApprovalWindowInvalid("a time box goes with an approval, not a deny")
    top = settings.ROSTER_APPROVAL_WINDOW_MAX_MINUTES
    if not 1 <= value <= top:
        raise ApprovalWindowInvalid(f"the time box must be 1 to {top} minutes" if top
                                    else "time-boxed approvals are turned off")
    return value


def clean_comment(comment: str | None, *, approve: bool) -> str:
    """The approver's comment as recorded: control characters dropped (it reaches the box and logs),
    bounded, and required for a deny when ROSTER_APPROVAL_DENY_COMMENT_REQUIRED is on."""
    text = "".join(ch if ch.isprintable() else " " for ch in (comment or "")).strip()
    limit = settings.ROSTER_APPROVAL_COMMENT_MAX_CHARS
    if len(text) > limit:
        raise ApprovalCommentInvalid(f"the comment is longer than {limit} characters")
    if not approve and not text and settings.ROSTER_APPROVAL_DENY_COMMENT_REQUIRED:
        raise ApprovalCommentInvalid("a reason is required to deny a request")
    return text_for_record(text)


# Transport headers: how the request travels, not what it asks for (the gateway owns or drops them, and
# Content-Length is covered by the body's digest). Every other header is bound to an approval, so a
# replay with another Authorization, Content-Type, Accept or method override is another request.
UNBOUND_HEADERS = frozenset({"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
                             "proxy-authorization", "proxy-connection", "content-length", "host"})


def bound_headers(headers) -> list[tuple[str, str]]:
    """The (lower-cased name, value) pairs an approval binds, in a fixed order (by name, then as sent)."""
    pairs = [(str(n).lower(), str(v)) for n, v in headers if str(n).lower() not in UNBOUND_HEADERS]
    return sorted(pairs, key=lambda pair: pair[0])


def request_digest(method: str, url: str, body_sha256: str, headers=()) -> str:
    """What an approval covers: method, exact URL, body digest and bound headers (docs/wire.md, approvals).
    JSON-encoded so no field can bleed into the next."""
    bound = json.dumps([method.upper(), url, body_sha256.lower(), bound_headers(headers)],
                       separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(bound.encode("utf-8", "surrogatepass")).hexdigest()


def request_snapshot(
    *, method: str, url: str, headers: list[tuple[str, str]], body_preview: str, body_sha256: str,
    body_size: int, sentinels: frozenset[str] = frozenset(),
) -> dict:
    """What an approver sees: quoted data, with credentials and sentinel values masked (in the URL too:
    a sentinel, `key=`/`token=`/`sig=`... query values). `sentinels` adds literals to the vault's own."""
    shown = []
    for name, value in headers:
        if (is_credential_name(name) or any(s and s in value for s in sentinels)
                or sentinel_secret_ids([value])):  # also a sentinel inside Basic credentials
            value = MASK
        shown.append([name, value])
    preview = text_for_record(body_preview[: settings.ROSTER_BODY_PREVIEW_BYTES], sentinels)
    return {"method": method, "url": url_for_record(url, sentinels), "headers": shown,
            "bound_headers": sorted({name for name, _ in bound_headers(headers)}),
            "body_preview": preview, "body_sha256": body_sha256, "body_size": body_size}


def approval_open(*, run, grant_id: int | None, grant_slug: str, snapshot: dict,
                  now: datetime | None = None, digest: str | None = None) -> Approval:
    """Open a pending approval. Call inside the decision's transaction (audited there). `digest` is the
    request_digest of the request as received (the snapshot's URL is masked); default: the snapshot's."""
    now = now or timezone.now()
    approval = Approval.objects.create(
        run=run, grant_id=grant_id, grant_slug=grant_slug, request=snapshot,
        request_digest=digest or request_digest(snapshot["method"], snapshot["url"], snapshot["body_sha256"]),
        expires_at=now + timedelta(seconds=settings.ROSTER_APPROVAL_TTL_SECONDS),
    )
    audit_append(
        "approval",
        {"approval": str(approval.pk), "event": "opened", "grant": grant_slug, "method": snapshot["method"],
         "url": snapshot["url"], "body_sha256": snapshot["body_sha256"],
         "expires_at": approval.expires_at.isoformat()},
        run=run, verdict="ask",
    )
    transaction.on_commit(lambda: broadcast.approval_changed(str(approval.pk), Approval.Status.PENDING))
    transaction.on_commit(lambda: mail.notify_later(approval.pk))
    return approval


def approval_decide(approval_id, user, approve: bool, channel: str, comment: str = "",
                    evidence: dict | None = None, window_minutes: int = 0) -> Approval:
    """Decide a held request. `evidence`: where a decision from chat came from (the post's id and the
    approver's chat id), recorded with it. `window_minutes`: a time-boxed approval, which also lets
    identical requests of the same worker through for that long (approval_window_match); its scope and
    expiry are recorded with the decision."""
    if user is None or not user.is_active or not user.has_perm(DECIDE_PERMISSION):
        raise PermissionDenied("you may not decide approvals")
    if channel not in Approval.Channel.values:
        raise ValueError(f"unknown approval channel {channel!r}")
    comment = clean_comment(comment, approve=approve)
    window_minutes = clean_window(window_minutes, approve=approve)
    now = timezone.now()
    with transaction.atomic():
        approval = Approval.objects.select_for_update().select_related("run__worker").get(pk=approval_id)
        if approval.status != Approval.Status.PENDING:
            raise ApprovalClosed(f"approval {approval_id} is already {approval.status}")
        if approval.expires_at <= now:
            raise ApprovalClosed(f"approval {approval_id} expired at {approval.expires_at.isoformat()}")
        if approve and not approval.run.is_live:
            # Nothing could use it; refusing is still allowed so the queue can be cleared on the record.
            raise ApprovalClosed(f"the run of approval {approval_id} has ended; it cannot be approved")
        approval.status = Approval.Status.APPROVED if approve else Approval.Status.REFUSED
        approval.decided_by = user
        approval.decided_at = now
        approval.channel = channel
        approval.comment = comment
        if approve and approval.abandoned_at is not None:
            approval.grace_until = now + timedelta(seconds=settings.ROSTER_APPROVAL_GRACE_SECONDS)
        window = None
        if window_minutes:
            approval.window_until = now + timedelta(minutes=window_minutes)
            window = {"minutes": window_minutes, "until": approval.window_until.isoformat(),
                      "scope": window_scope(approval)}
        approval.save()
        audit_append(
            "approval",
            {"approval": str(approval.pk), "event": "decided", "status": approval.status,
             "by": user.get_username(), "at": now.isoformat(), "channel": channel,
             "grant": approval.grant_slug, "url": url_for_record(approval.request.get("url", "")),
             "comment": comment, **({"evidence": evidence} if evidence else {}),
             **({"window": window} if window else {})},
            run=approval.run, verdict=approval.status,
        )
        status = approval.status
        transaction.on_commit(lambda: broadcast.approval_changed(str(approval.pk), status))
    return approval


def window_scope(approval: Approval) -> dict:
    """What a time-boxed approval lets through: requests of this worker (any of its runs) matched by this
    grant whose request digest (method, exact URL, body digest, bound headers) is this one's."""
    return {"worker": approval.run.worker.name, "grant": approval.grant_slug,
            "request_digest": approval.request_digest}


def approval_window_match(worker_id: int, digest: str, grant_slug: str,
                          now: datetime | None = None) -> Approval | None:
    """The time-boxed approval covering this request, or None: same worker, same grant, same digest,
    approved (or already used by the request it showed), its window open and not revoked. It is not
    consumed: the window lets every identical request through until it ends."""
    now = now or timezone.now()
    return (Approval.objects.filter(
        run__worker_id=worker_id, request_digest=digest, grant_slug=grant_slug,
        status__in=(Approval.Status.APPROVED, Approval.Status.USED), window_until__gt=now,
        window_revoked_at__isnull=True).select_related("decided_by").order_by("-window_until").first())


def approval_window_revoke(approval_id, user) -> Approval:
    """End a time-boxed approval's window now; the next identical request asks again. Audited."""
    if user is None or not user.is_active or not user.has_perm(DECIDE_PERMISSION):
        raise PermissionDenied("you may not revoke approvals")
    now = timezone.now()
    with transaction.atomic():
        approval = Approval.objects.select_for_update().select_related("run__worker").get(pk=approval_id)
        if approval.window_until is None or approval.window_until <= now or approval.window_revoked_at:
            raise ApprovalClosed(f"approval {approval_id} has no open time box")
        approval.window_revoked_at, approval.window_revoked_by = now, user
        approval.save(update_fields=["window_revoked_at", "window_revoked_by"])
        audit_append("approval", {"approval": str(approval.pk), "event": "window_revoked",
                                  "by": user.get_username(), "at": now.isoformat(),
                                  "was_until": approval.window_until.isoformat(),
                                  "scope": window_scope(approval)}, run=approval.run)
        transaction.on_commit(lambda: broadcast.approval_changed(str(approval.pk), approval.status))
    return approval


def approval_abandon(approval_id) -> Approval:
    """The gateway stopped holding the request. The approval stays decidable; if it is (or already was)
    approved, the next identical request within the grace period passes once."""
    now = timezone.now()
    with transaction.atomic():
        approval = Approval.objects.select_for_update().select_related("run__worker").get(pk=approval_id)
        if approval.abandoned_at is None:
            approval.abandoned_at = now
            if approval.status == Approval.Status.APPROVED and approval.grace_until is None:
                approval.grace_until = now + timedelta(seconds=settings.ROSTER_APPROVAL_GRACE_SECONDS)
            approval.save(update_fields=["abandoned_at", "grace_until"])
            audit_append("approval", {"approval": str(approval.pk), "event": "abandoned",
                                      "status": approval.status}, run=approval.run)
            # Open queue pages show that the box stopped waiting.
            status = approval.status
            transaction.on_commit(lambda: broadcast.approval_changed(str(approval.pk), status))
    return approval


def approval_expire_due(now: datetime | None = None) -> int:
    """Mark pending approvals past their expiry as expired, and close those whose run has ended (no box
    waits for them: a card with a countdown and a Deny button would be a question nobody asked any
    more). Returns how many."""
    now = now or timezone.now()
    expired = 0
    with transaction.atomic():
        due = Approval.objects.select_related("run__worker").filter(
            Q(expires_at__lte=now) | ~Q(run__status__in=Run.LIVE_STATUSES), status=Approval.Status.PENDING)
        for approval in due:
            ended = approval.expires_at > now  # not yet due: closed because its run ended
            why = f"run {approval.run_id} ended ({approval.run.status})" if ended else ""
            if not Approval.objects.filter(pk=approval.pk, status=Approval.Status.PENDING).update(
                    status=Approval.Status.EXPIRED, closed_why=why):
                continue
            event = {"event": "closed", "why": why} if ended else {"event": "expired"}
            audit_append("approval", {"approval": str(approval.pk), **event},
                         run=approval.run, verdict=Approval.Status.EXPIRED)
            expired += 1
            approval_id = str(approval.pk)
            transaction.on_commit(
                lambda a=approval_id: broadcast.approval_changed(a, Approval.Status.EXPIRED))
    return expired


def approval_consume(approval_id, run_id: int, now: datetime | None = None, *, held: bool = False) -> bool:
    """approved -> used, at most once: a conditional UPDATE, so of two concurrent waiters one wins.
    `held`: only while the gateway still holds the request (not abandoned); an abandoned approval is
    used only by an identical retry within its grace (approval_consume_grace)."""
    now = now or timezone.now()
    rows = Approval.objects.filter(pk=approval_id, run_id=run_id, status=Approval.Status.APPROVED)
    if held:
        rows = rows.filter(abandoned_at__isnull=True)
    return bool(rows.update(status=Approval.Status.USED, used_at=now))


def approval_consume_grace(run_id: int, digest: str, grant_slug: str,
                           now: datetime | None = None) -> Approval | None:
    """The approved, abandoned approval for this exact request (same run, same digest, same grant)
    still in its grace period, consumed; or None. Each such approval lets exactly one request through."""
    now = now or timezone.now()
    candidates = Approval.objects.filter(
        run_id=run_id, request_digest=digest, grant_slug=grant_slug, status=Approval.Status.APPROVED,
        grace_until__gt=now,
    ).order_by("decided_at").values_list("pk", flat=True)
    for approval_id in candidates:
        if approval_consume(approval_id, run_id, now):
            return Approval.objects.select_related("grant").get(pk=approval_id)
    return None


def approval_mark_expired(approval_id) -> bool:
    """A waiter saw a pending approval past its expiry: expire it now rather than wait for the sweep."""
    with transaction.atomic():
        approval = Approval.objects.select_related("run__worker").get(pk=approval_id)
        if not Approval.objects.filter(pk=approval_id, status=Approval.Status.PENDING,
                                       expires_at__lte=timezone.now()).update(status=Approval.Status.EXPIRED):
            return False
        audit_append("approval", {"approval": str(approval_id), "event": "expired"}, run=approval.run,
                     verdict=Approval.Status.EXPIRED)
        transaction.on_commit(lambda: broadcast.approval_changed(str(approval_id), Approval.Status.EXPIRED))
    return True
