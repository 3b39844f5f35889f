"""`approval list [--status S] [--limit N] [--worker NAME] [--run ID]`, `approval show ID`,
`approval decide ID approve|refuse --user NAME [--comment TEXT] [--window MINUTES]`,
`approval revoke-window ID --user NAME`: the local approval path. The named user must hold
approvals.decide_approval; recorded with channel "cli".

`approval list` shows what the queue page's card shows (the same masking: credential headers masked,
sentinels named, hidden characters escaped), one field per line, every line free of terminal controls."""

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError

from controlplane.approvals.cards import ApprovalCard, QueueFilter, approval_card, approval_cards
from controlplane.approvals.models import Approval
from controlplane.approvals.services import (
    ApprovalClosed,
    ApprovalCommentInvalid,
    ApprovalWindowInvalid,
    approval_decide,
    approval_window_revoke,
)
from controlplane.core.terminal import one_line
from controlplane.core.timefmt import duration_text, when_text

BODY_PREVIEW_CHARS = 400
HEADER_VALUE_CHARS = 200


def card_lines(card: ApprovalCard) -> list[str]:
    """One approval as an approver needs it, as on the web card."""
    if card.status == Approval.Status.PENDING:
        state = f"pending, {duration_text(card.seconds_left)} left (expires {when_text(card.expires_at)})"
    else:
        by = f" by {card.decided_by}" if card.decided_by else ""
        state = f"{card.status}{by}" + (f" ({card.channel})" if card.channel else "")
        if card.closed_why:
            state = f"closed: {card.closed_why} (no decision needed any more)"
        if card.window_until:
            state += f"; identical requests of {card.worker} pass until {when_text(card.window_until)}"
    lines = [f"approval {card.id}: {state}",
             f"  request  {one_line(card.method, 16)} {one_line(card.url, 300)}",
             f"  worker   {card.worker}, run {card.run_id} (taint {card.taint}"
             f"{', has read UNTRUSTED input' if card.untrusted else ''})",
             f"  grant    {card.grant_slug or '-'}",
             f"  why      {one_line(card.grant_description, 300) or '(the grant has no description)'}"]
    lines += [f"  header   {one_line(name, 80)}: {one_line(value, HEADER_VALUE_CHARS)}"
              for name, value in card.headers]
    size = "" if card.body_size is None else f"{card.body_size} bytes"
    digest = f", sha256 {card.body_sha256[:16]}…" if card.body_sha256 else ""
    preview = one_line(card.body_preview, BODY_PREVIEW_CHARS) if card.body_preview else "(empty)"
    lines.append(f"  body     ({size or 'size unknown'}{digest}) {preview}")
    return lines


class Command(BaseCommand):
    help = "List approvals and decide them from the host."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        lister = sub.add_parser("list", help="list approvals, newest first")
        lister.add_argument("--status", choices=Approval.Status.values)
        lister.add_argument("--limit", type=int, default=50, help="at most this many, newest first")
        lister.add_argument("--worker", default="", help="only this worker's approvals (its name)")
        lister.add_argument("--run", type=int, default=None, help="only this run's approvals")
        show = sub.add_parser("show", help="one approval, as on its card")
        show.add_argument("approval_id")
        decide = sub.add_parser("decide", help="approve or refuse a pending approval")
        decide.add_argument("approval_id")
        decide.add_argument("choice", choices=["approve", "refuse"])
        decide.add_argument("--user", required=True, help="the approver's username (recorded)")
        decide.add_argument("--comment", default="",
                            help="why (audited; a refusal's comment reaches the box)")
        decide.add_argument("--window", type=int, default=0, metavar="MINUTES",
                            help="with approve: also allow identical requests of the worker for this long "
                                 "(at most ROSTER_APPROVAL_WINDOW_MAX_MINUTES)")
        revoke = sub.add_parser("revoke-window", help="end a time-boxed approval now")
        revoke.add_argument("approval_id")
        revoke.add_argument("--user", required=True, help="the approver's username (recorded)")

    def handle(self, *args, action, **options):
        if action == "list":
            only = QueueFilter(worker=options["worker"], run_id=options["run"])
            cards = approval_cards(status=options.get("status"), limit=options["limit"], only=only)
            if not cards:
                status = options.get("status")
                self.stdout.write("no approvals" + (f" with status {status}" if status else ""))
            for card in cards:
                self.stdout.write("\n".join(card_lines(card)))
            return
        if action == "show":
            try:
                approval = Approval.objects.get(pk=options["approval_id"])
            except (Approval.DoesNotExist, ValidationError) as exc:
                raise CommandError(f"no approval {options['approval_id']!r}") from exc
            self.stdout.write("\n".join(card_lines(approval_card(approval))))
            return
        try:
            user = get_user_model().objects.get(username=options["user"])
        except get_user_model().DoesNotExist as exc:
            raise CommandError(f"no user named {options['user']!r}") from exc
        try:
            if action == "revoke-window":
                approval = approval_window_revoke(options["approval_id"], user)
                self.stdout.write(f"approval {approval.pk}: time box revoked by {user.get_username()}")
                return
            approval = approval_decide(options["approval_id"], user, options["choice"] == "approve", "cli",
                                       comment=options["comment"], window_minutes=options["window"])
        except (Approval.DoesNotExist, ValidationError) as exc:
            raise CommandError(f"no approval {options['approval_id']!r}") from exc
        except PermissionDenied as exc:
            raise CommandError(f"{user.get_username()} may not decide approvals") from exc
        except (ApprovalClosed, ApprovalCommentInvalid, ApprovalWindowInvalid) as exc:
            raise CommandError(str(exc)) from exc
        box = (f"; identical requests pass until {when_text(approval.window_until)}"
               if approval.window_until else "")
        self.stdout.write(f"approval {approval.pk} {approval.status} by {user.get_username()}{box}")
