"""`manage.py demo [--auto-approve]`: the reference agent on real traffic against a running stack
(scripts/demo.sh, `make demo`, starts one). Ends with the line
`demo: <m> model calls, <t> tokens metered, <a> allowed, <d> denied, <p> proposals executed, audit OK`."""

from __future__ import annotations

import os
import secrets
import time

from django.core.management.base import BaseCommand, CommandError

from controlplane.approvals.models import Approval
from controlplane.approvals.services import ApprovalClosed, approval_decide
from controlplane.audit.verify import verify_database
from controlplane.dispatch.box import agent_command
from controlplane.dispatch.starting import run_start
from controlplane.fleet import demo, demo_proposals
from controlplane.fleet.demo_report import report_lines, run_facts, summary_line
from controlplane.fleet.models import Run
from controlplane.proposals.services import ProposalClosed, proposal_decide


class Command(BaseCommand):
    help = "Run the reference agent against the scripted model through the gateway, and report."

    def add_arguments(self, parser):
        parser.add_argument("--auto-approve", action="store_true",
                            default=os.environ.get("DEMO_AUTO_APPROVE") == "1",
                            help="approve held requests as demo-approver (CI; DEMO_AUTO_APPROVE=1); "
                                 "default: wait for a human")
        parser.add_argument("--model-port", type=int, default=18091)
        parser.add_argument("--docs-port", type=int, default=18092)
        parser.add_argument("--ask-port", type=int, default=18093)
        parser.add_argument("--hook-port", type=int, default=18094, help="the local webhook receiver")
        parser.add_argument("--smtp-port", type=int, default=18095, help="the local mail server")
        parser.add_argument("--timeout", type=int, default=240, help="seconds the run may take")
        parser.add_argument("--started-at", type=float, default=None, help="epoch seconds the demo began")

    def say(self, line: str = "") -> None:
        self.stdout.write(line)

    def handle(self, *args, auto_approve, model_port, docs_port, ask_port, hook_port, smtp_port, timeout,
               started_at, **_):
        began = started_at or time.time()
        ports = demo.DemoPorts(model=model_port, docs=docs_port, ask=ask_port)
        key = "sk-demo-" + secrets.token_urlsafe(32)  # made up now: no real key is needed or used
        with demo.demo_upstreams(ports, key) as model, \
                demo_proposals.receivers(hook_port, smtp_port) as deliveries:
            worker, grants = demo.demo_setup(ports, key)
            demo_proposals.setup(worker, hook_port, smtp_port)
            self.say(f"destinations {demo_proposals.HOOK_DESTINATION} (webhook; earned-trust rule "
                     f"{demo_proposals.HOOK_RULE}) and {demo_proposals.MAIL_DESTINATION} (mail, held for a "
                     "person): the box has no grant to either server")
            self.say(f"worker {worker.name}; secret {demo.MODEL_SECRET} (kind openai; the box gets only its "
                     "sentinel)")
            for grant in grants:
                what = f"{grant.mode} {','.join(grant.methods) or 'any'} {grant.host}:{grant.port}"
                extra = " key injected, inputs traced" if grant.secret_id else ""
                self.say(f"grant {grant.slug}: {what} {' '.join(grant.paths)}{extra}")
            others = demo.org_wide_grants()
            if others:
                self.say(f"note: org-wide grants also apply to every worker: {', '.join(others)}")
            command = agent_command(demo.TASK, base_url=ports.url(ports.model, "/v1"),
                                    model="roster-scripted")
            run = run_start(worker, command, timeout=timeout)
            timeline = demo.web_url(f"/runs/{run.pk}/")
            self.say(f"run {run.pk} started: the agent on {demo.TASK!r}")
            self.say(f"timeline: {timeline}")
            run = self._watch(run, auto_approve, timeout + 60)
            received = list(model.records)
            facts = run_facts(run, demo.MODEL_GRANT)
            self.say()
            for line in report_lines(run, facts, timeline):
                self.say(line)
            for line in demo_proposals.report_lines(run, deliveries):
                self.say(line)
        authorized = sum(1 for r in received if r["authorized"])
        self.say(f"  the model server received {len(received)} requests, {authorized} with the real key "
                 "(injected by the gateway; the box held only the sentinel)")
        self.say("")
        self.say("== audit verify")
        result = verify_database()
        self.say(f"  {result.message}")
        self.say(f"demo took {time.time() - began:.0f} s")
        self.say(summary_line(facts, result.ok))
        problems = self._problems(run, facts, received, result.ok)
        if facts.proposals_executed < 2 or len(deliveries.posts) != 1 or len(deliveries.mails) != 1:
            problems.append("the post and the e-mail were not each delivered exactly once")
        if problems:
            raise CommandError("demo failed: " + "; ".join(problems))

    def _watch(self, run: Run, auto_approve: bool, limit: float) -> Run:
        deadline = time.monotonic() + limit
        shown: set = set()
        approver = demo.demo_approver() if auto_approve else None
        while run.is_live or demo_proposals.unsettled(run):
            if time.monotonic() > deadline:
                raise CommandError(f"run {run.pk} still {run.status} after {limit:.0f} s (or its proposals "
                                   "were not settled)")
            self._proposals(run, approver, shown)
            for approval in Approval.objects.filter(run=run, status=Approval.Status.PENDING):
                if approval.pk in shown:
                    continue
                shown.add(approval.pk)
                request = f"{approval.request.get('method')} {approval.request.get('url')}"
                if approver is None:
                    self.say(f"held for approval: {request}")
                    self.say(f"  approve it at {demo.web_url('/approvals/')} (as an approver; it is held "
                             f"until {approval.expires_at:%H:%M:%S})")
                    continue
                try:
                    approval_decide(approval.pk, approver, True, Approval.Channel.CLI)
                    self.say(f"approved {request} as {approver.get_username()} (--auto-approve)")
                except ApprovalClosed as exc:
                    self.say(f"could not approve {request}: {exc}")
            time.sleep(0.2)
            run.refresh_from_db()
        return run

    def _proposals(self, run: Run, approver, shown: set) -> None:
        for proposal in demo_proposals.pending(run):
            if proposal.pk in shown:
                continue
            shown.add(proposal.pk)
            where = proposal.destination.name if proposal.destination_id else "the worker's identity"
            what = f"{proposal.kind} to {where}"
            if approver is None:
                self.say(f"proposed: {what}; approve it at {demo.web_url('/approvals/')} (as an approver)")
                continue
            try:
                proposal_decide(proposal.pk, approver, True, "cli", reason="make demo --auto-approve")
                self.say(f"approved the proposed {what} as {approver.get_username()} (--auto-approve)")
            except ProposalClosed as exc:
                self.say(f"could not approve the proposed {what}: {exc}")

    @staticmethod
    def _problems(run: Run, facts, received: list[dict], audit_ok: bool) -> list[str]:
        problems = []
        if run.status != Run.Status.SUCCEEDED:
            problems.append(f"the run {run.status}")
        if not audit_ok:
            problems.append("the audit chain does not verify")
        if not received or not all(r["authorized"] for r in received):
            problems.append("the model server did not get the real key on every call")
        if facts.model_calls == 0 or facts.denied == 0:
            problems.append("the run made no model call or no denied request")
        return problems
