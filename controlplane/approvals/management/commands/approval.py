"""`approval list [--status S]`, `approval decide ID approve|refuse --user NAME [--comment TEXT]`: the
local approval path (seed 002 §3). The named user must hold approvals.decide_approval; recorded with
channel "cli"."""

import json

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError

from controlplane.approvals.models import Approval
from controlplane.approvals.selectors import approval_list
from controlplane.approvals.services import ApprovalClosed, ApprovalCommentInvalid, approval_decide


class Command(BaseCommand):
    help = "List approvals and decide them from the host."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        lister = sub.add_parser("list", help="list approvals, newest first")
        lister.add_argument("--status", choices=Approval.Status.values)
        decide = sub.add_parser("decide", help="approve or refuse a pending approval")
        decide.add_argument("approval_id")
        decide.add_argument("choice", choices=["approve", "refuse"])
        decide.add_argument("--user", required=True, help="the approver's username (recorded)")
        decide.add_argument("--comment", default="",
                            help="why (audited; a refusal's comment reaches the box)")

    def handle(self, *args, action, **options):
        if action == "list":
            for a in approval_list(status=options.get("status")):
                req = a.request
                self.stdout.write(
                    f"{a.pk}\t{a.status}\t{a.run.worker.name}\trun {a.run_id}\t{a.grant_slug}\t"
                    f"{json.dumps(req.get('method'))} {json.dumps(req.get('url'))}\t"
                    f"expires {a.expires_at:%H:%M:%S}"
                )
            return
        try:
            user = get_user_model().objects.get(username=options["user"])
        except get_user_model().DoesNotExist as exc:
            raise CommandError(f"no user named {options['user']!r}") from exc
        try:
            approval = approval_decide(options["approval_id"], user, options["choice"] == "approve", "cli",
                                       comment=options["comment"])
        except (Approval.DoesNotExist, ValidationError) as exc:
            raise CommandError(f"no approval {options['approval_id']!r}") from exc
        except PermissionDenied as exc:
            raise CommandError(f"{user.get_username()} may not decide approvals") from exc
        except (ApprovalClosed, ApprovalCommentInvalid) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"approval {approval.pk} {approval.status} by {user.get_username()}")
