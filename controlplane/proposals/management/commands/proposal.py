"""`proposal list [--status S]`, `proposal show ID`, `proposal decide ID approve|refuse --user NAME
[--reason TEXT]`, `proposal retry ID --user NAME`: the host's path to proposals (docs/proposals.md). The
named user must be an approver; decisions are recorded with channel "cli"."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError

from controlplane.core.timefmt import EPOCH, when_text
from controlplane.proposals import previews, services
from controlplane.proposals.models import Proposal

LIST_COLUMNS = ("id", "status", "worker", "run", "kind", "destination", "what", "approved by rule")


def decision_facts(proposal: Proposal) -> dict:
    """What `show` answers first: where the proposal stands, who decided it (a person, an earned-trust
    rule, or nobody yet) and what came of it; times in UTC with the date."""
    if proposal.trust_rule_id:
        decider = f"earned-trust rule {proposal.trust_rule.name}"
    elif proposal.decided_by_id:
        decider = proposal.decided_by.get_username()
    else:
        decider = None
    return {
        "id": str(proposal.pk), "status": proposal.status, "worker": proposal.worker.name,
        "run": proposal.run_id, "created": when_text(proposal.created_at, EPOCH),
        "expires": when_text(proposal.expires_at, EPOCH), "decided_by": decider,
        "decided": when_text(proposal.decided_at, EPOCH) if proposal.decided_at else None,
        "channel": proposal.channel or None, "reason": proposal.reason or None,
        "attempts": proposal.attempts,
        "executed": when_text(proposal.executed_at, EPOCH) if proposal.executed_at else None,
        "outcome": proposal.result or None,
    }


class Command(BaseCommand):
    help = "List, show, decide and retry proposals from the host."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        lister = sub.add_parser("list", help="list proposals, newest first")
        lister.add_argument("--status", choices=Proposal.Status.values)
        sub.add_parser("show", help="what the proposal will do, as an approver sees it").add_argument(
            "proposal_id"
        )
        decide = sub.add_parser("decide", help="approve or refuse a pending proposal")
        decide.add_argument("proposal_id")
        decide.add_argument("choice", choices=["approve", "refuse"])
        decide.add_argument("--user", required=True, help="the approver's username (recorded)")
        decide.add_argument("--reason", default="", help="why (recorded; the box sees a refusal's reason)")
        retry = sub.add_parser("retry", help="send a failed proposal to its executor again")
        retry.add_argument("proposal_id")
        retry.add_argument("--user", required=True)

    def handle(self, *args, action, **options):
        if action == "list":
            proposals = Proposal.objects.select_related("worker", "destination").order_by("-created_at")
            if options.get("status"):
                proposals = proposals.filter(status=options["status"])
            self.stdout.write("\t".join(LIST_COLUMNS))
            for p in proposals[:200]:
                rule = f"\trule {p.trust_rule.name}" if p.trust_rule_id else ""
                self.stdout.write(
                    f"{p.pk}\t{p.status}\t{p.worker.name}\trun {p.run_id}\t{p.kind}\t"
                    f"{p.destination.name if p.destination_id else '-'}\t"
                    f"{json.dumps(previews.headline(p))}{rule}"
                )
            return
        proposal_id = options["proposal_id"]
        try:
            if action == "show":
                proposal = Proposal.objects.select_related("worker", "destination", "decided_by",
                                                           "trust_rule").get(pk=proposal_id)
                shown = {**decision_facts(proposal), **previews.preview(proposal)}
                self.stdout.write(json.dumps(shown, indent=2, default=str))
                return
            user = self._user(options["user"])
            if action == "retry":
                proposal = services.proposal_retry(proposal_id, user)
            else:
                proposal = services.proposal_decide(
                    proposal_id, user, options["choice"] == "approve", "cli", reason=options["reason"]
                )
        except (Proposal.DoesNotExist, ValidationError) as exc:
            raise CommandError(f"no proposal {proposal_id!r}") from exc
        except PermissionDenied as exc:
            raise CommandError(f"{options['user']} may not decide proposals") from exc
        except (services.ProposalClosed, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        proposal.refresh_from_db()
        self.stdout.write(f"proposal {proposal.pk} {proposal.status}")

    @staticmethod
    def _user(name: str):
        try:
            return get_user_model().objects.get(username=name)
        except get_user_model().DoesNotExist as exc:
            raise CommandError(f"no user named {name!r}") from exc
