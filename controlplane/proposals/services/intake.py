"""Receiving a proposal from a box (through the gateway, with the run's token): strict parsing, the
destination's rules (kind, recipients, branches, taint ceiling), its cost against the caps, then ONE
transaction that records the proposal with its provenance, audits it and applies an earned-trust rule if
one allows it. A rejected proposal leaves nothing but its audited rejection. Also what the box may see
of its own proposal."""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.audit.services import lock_chain_head
from controlplane.core.errors import RosterError
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Run, RunDecision
from controlplane.fleet.selectors import live_run_for_token
from controlplane.fleet.tokens import token_address_problem
from controlplane.ledger.models import SpendLine, Unit
from controlplane.ledger.services import reserve
from controlplane.ledger.totals import window_start
from controlplane.ledger.types import OverBudget
from controlplane.proposals import schemas
from controlplane.proposals.models import NO_DESTINATION_KINDS, Destination, Proposal
from controlplane.proposals.services.deciding import approve_by_rule
from controlplane.proposals.services.record import record, record_refusal
from controlplane.proposals.validation import PROPOSAL_KIND_FOR_DESTINATION, branch_allowed, recipient_allowed


@dataclass
class Answer:
    """What the box is told: an HTTP status and a JSON body (never a secret, never a URL of a destination)."""

    status: int
    body: dict = field(default_factory=dict)


class Rejected(RosterError):
    """Why a submission is refused: the box's HTTP status, a fixed reason and a message for it."""

    def __init__(self, status: int, reason: str, message: str, details: list[str] | None = None):
        self.status, self.reason, self.message, self.details = status, reason, message, details or []
        super().__init__(message)


def _reject_answer(exc: Rejected) -> Answer:
    body = {"error": exc.reason, "message": exc.message}
    if exc.details:
        body["details"] = exc.details
    return Answer(exc.status, body)


def _box_run(token: str, client: str) -> tuple[Run | None, str]:
    """The live run the token belongs to if it came from that run's box (the gateway's `client`), else
    None and, for a known run's token from elsewhere, why (for the audit record, never the box)."""
    run = live_run_for_token(token)
    if run is None:
        return None, ""
    problem = token_address_problem(client, run.box_address)
    return (None, problem) if problem else (run, "")


def proposal_submit(token: str, raw: bytes, client: str = "") -> Answer:
    """The gateway's /proposals call. The run is the token's; nothing in `raw` can name another."""
    run, refused = _box_run(token, client)
    if run is None:
        exc = Rejected(407, "bad_token", "proxy credentials (the run token) are missing, unknown or expired")
        record_refusal(None, raw, exc.reason, refused or exc.message)
        return _reject_answer(exc)
    kind = destination = ""
    try:
        if len(raw) > settings.ROSTER_PROPOSAL_MAX_BYTES:
            raise Rejected(
                413, "too_large", f"a proposal is limited to {settings.ROSTER_PROPOSAL_MAX_BYTES} bytes"
            )
        try:
            proposal_in = schemas.parse_proposal(raw)
        except schemas.ValidationError as exc:
            raise Rejected(
                422,
                "invalid_proposal",
                "the proposal does not match its schema (docs/proposals.md)",
                schemas.error_messages(exc),
            ) from None
        kind = proposal_in.kind
        destination = getattr(proposal_in, "destination", "")
        dest = _destination_for(proposal_in)
        return _record(run, proposal_in, dest, raw)
    except Rejected as exc:
        record_refusal(run, raw, exc.reason, exc.message, kind, destination)
        return _reject_answer(exc)


def _destination_for(proposal_in) -> Destination | None:
    if proposal_in.kind in (Proposal.Kind.IDENTITY_EDIT, *NO_DESTINATION_KINDS):
        return None
    dest = Destination.objects.select_related("secret").filter(name=proposal_in.destination).first()
    if dest is None or not dest.enabled:
        raise Rejected(404, "no_destination", f"no enabled destination named {proposal_in.destination!r}")
    if PROPOSAL_KIND_FOR_DESTINATION[dest.kind] != proposal_in.kind:
        raise Rejected(
            422,
            "wrong_kind",
            f"destination {dest.name!r} takes "
            f"{PROPOSAL_KIND_FOR_DESTINATION[dest.kind]} proposals, not {proposal_in.kind}",
        )
    if proposal_in.kind == Proposal.Kind.EMAIL:
        refused = [
            a for a in proposal_in.payload.to if not recipient_allowed(a, dest.allowed_recipients or [])
        ]
        if refused:
            raise Rejected(
                403,
                "recipient_not_allowed",
                f"destination {dest.name!r} may not send to {', '.join(refused[:5])}",
            )
    if proposal_in.kind == Proposal.Kind.GIT_PUSH:
        why = branch_allowed(proposal_in.payload.branch, dest.branch_pattern, dest.protected_branches or [])
        if why:
            raise Rejected(403, "branch_not_allowed", why)
    return dest


def _seen_by(run_id: int) -> list[dict]:
    """Who was in the room: the results this run received (newest first), by grant and masked URL."""
    rows = (
        RunDecision.objects.filter(run_id=run_id)
        .order_by("-id")
        .values_list("grant_slug", "url", "result_class", "untrusted", "outcome_status")[
            : settings.ROSTER_PROPOSAL_SEEN_MAX
        ]
    )
    return [
        {"grant": g, "url": u[:300], "result_class": DataClass(c).label, "untrusted": bool(t), "status": s}
        for g, u, c, t, s in rows
    ]


def _over_daily_limit(dest: Destination, worker_id: int) -> bool:
    if not dest.daily_limit:
        return False
    used = SpendLine.objects.filter(
        worker_id=worker_id,
        grant_slug=dest.ledger_slug,
        kind=SpendLine.Kind.RESERVE,
        unit=Unit.REQUESTS,
        created_at__gte=window_start("day", timezone.now()),
    ).count()
    return used >= dest.daily_limit


def _record(run_snapshot: Run, proposal_in, dest: Destination | None, raw: bytes) -> Answer:
    payload = proposal_in.model_dump(mode="json")["payload"]
    payload_json = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    with transaction.atomic():
        lock_chain_head()  # one writer: the daily count and the reservation below must not interleave
        run = Run.objects.select_related("worker").get(pk=run_snapshot.pk)
        if not run.is_live:
            raise Rejected(407, "bad_token", "the run has ended")
        if dest is not None and run.taint > dest.max_taint:
            raise Rejected(
                403,
                "taint_too_high",
                f"this run's data is {DataClass(run.taint).label}; destination "
                f"{dest.name!r} accepts at most {DataClass(dest.max_taint).label}",
            )
        if dest is not None:
            if _over_daily_limit(dest, run.worker_id):
                raise Rejected(
                    402,
                    "over_budget",
                    f"worker {run.worker.name!r} has made its "
                    f"{dest.daily_limit} proposals to {dest.name!r} for today",
                )
            reservation_id = "pr_" + secrets.token_urlsafe(16)
            spent = reserve(
                worker=run.worker,
                run=run,
                grant_slug=dest.ledger_slug,
                decision_id=reservation_id,
                cost_micro=dest.cost_micro,
                origin=run.origin,
            )
            if isinstance(spent, OverBudget):
                raise Rejected(402, "over_budget", spent.message)
        proposal = Proposal.objects.create(
            run=run,
            worker=run.worker,
            kind=proposal_in.kind,
            destination=dest,
            payload=payload,
            rationale=proposal_in.reason,
            payload_sha256=hashlib.sha256(payload_json.encode()).hexdigest(),
            taint=run.taint,
            untrusted=run.untrusted,
            participants=list(run.participants or []),
            seen=_seen_by(run.pk),
            expires_at=timezone.now() + timedelta(seconds=settings.ROSTER_PROPOSAL_TTL_SECONDS),
            idempotency_key="rp_" + secrets.token_hex(24),
        )
        record(
            proposal,
            "proposed",
            kind=proposal.kind,
            destination=dest.name if dest else None,
            payload_sha256=proposal.payload_sha256,
            body_size=len(raw),
            taint=DataClass(run.taint).label,
            untrusted=run.untrusted,
            participants=proposal.participants,
            seen=len(proposal.seen),
            cost_micro=dest.cost_micro if dest else 0,
            expires_at=proposal.expires_at.isoformat(),
        )
        approve_by_rule(proposal)
    return Answer(201, box_view(proposal))


def box_view(proposal: Proposal) -> dict:
    """What the box may know about its proposal: its state and a one-line outcome, nothing of the remote's
    body (a remote could echo a credential) and nothing of the destination's address."""
    view = {
        "id": str(proposal.pk),
        "kind": proposal.kind,
        "destination": proposal.destination.name if proposal.destination_id else None,
        "status": proposal.status,
        "expires_at": proposal.expires_at.isoformat(),
    }
    if proposal.status == Proposal.Status.REFUSED and proposal.reason:
        view["reason"] = proposal.reason[:500]
    if proposal.status in (Proposal.Status.EXECUTED, Proposal.Status.FAILED):
        view["outcome"] = str((proposal.result or {}).get("summary", ""))[:200]
    if proposal.channel == Proposal.Channel.RULE:
        view["approved_by_rule"] = True
    return view


def proposal_status_for_box(token: str, proposal_id, client: str = "") -> Answer:
    run, _ = _box_run(token, client)
    if run is None:
        return Answer(
            407, {"error": "bad_token", "message": "proxy credentials (the run token) are required"}
        )
    proposal = Proposal.objects.select_related("destination").filter(pk=proposal_id, run_id=run.pk).first()
    if proposal is None:  # another run's proposal is as invisible as one that does not exist
        return Answer(404, {"error": "not_found", "message": "no such proposal for this run"})
    return Answer(200, box_view(proposal))
