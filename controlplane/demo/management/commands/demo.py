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
from controlplane.core.timefmt import when_text
from controlplane.demo import proposals as demo_proposals
from controlplane.demo import scenario
from controlplane.demo.report import approval_wait, report_lines, run_facts, summary_line
from controlplane.dispatch.box import agent_command
from controlplane.dispatch.starting import run_start
from controlplane.fleet.models import Run
from controlplane.proposals.models import Proposal
from controlplane.proposals.services import ProposalClosed, proposal_decide

UNSETTLED = (Proposal.Status.PENDING, Proposal.Status.APPROVED, Proposal.Status.EXECUTING)


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
        parser.add_argument("--hook-port", type=int, default=18094)
        parser.add_argument("--smtp-port", type=int, default=18095, help="the local mail server")
        parser.add_argument("--timeout", type=int, default=240, help="seconds the run may take")
        parser.add_argument("--started-at", type=float, default=None, help="epoch seconds the demo began")

    def say(self, line: str = "") -> None:
        self.stdout.write(line)

    def handle(self, *args, auto_approve, model_port, docs_port, ask_port, hook_port, smtp_port, timeout,
               started_at, **_):
        began = started_at or time.time()
        ports = scenario.DemoPorts(model=model_port, docs=docs_port, ask=ask_port, hook=hook_port)
        key = "sk-demo-" + secrets.token_urlsafe(32)  # made up now: no real key is needed or used
        with scenario.demo_upstreams(ports, key) as upstreams, demo_proposals.mail_server(smtp_port) as mails:
            worker, grants = scenario.demo_setup(ports, key)
            demo_proposals.setup(worker, scenario.DESTINATION, smtp_port)
            self.say(f"worker {worker.name}; secret {scenario.MODEL_SECRET} (kind openai; the box gets only "
                     "its sentinel)")
            for grant in grants:
                what = f"{grant.mode} {','.join(grant.methods) or 'any'} {grant.host}:{grant.port}"
                extra = " key injected, inputs traced" if grant.secret_id else ""
                self.say(f"grant {grant.slug}: {what} {' '.join(grant.paths)}{extra}")
            hook = ports.url(ports.hook, "/hook")
            self.say(f"destination {scenario.DESTINATION}: webhook {hook} (posted by the trusted side once a "
                     f"proposal is approved; earned-trust rule {demo_proposals.HOOK_RULE} approves it)")
            relay = f"{demo_proposals.HOST}:{smtp_port}"
            self.say(f"destination {demo_proposals.MAIL_DESTINATION}: mail relay {relay} (each e-mail waits "
                     "for a person)")
            others = scenario.org_wide_grants()
            if others:
                self.say(f"note: org-wide grants also apply to every worker: {', '.join(others)}")
            command = agent_command(scenario.TASK, base_url=ports.url(ports.model, "/v1"),
                                    model="roster-scripted")
            run = run_start(worker, command, timeout=timeout, task=scenario.TASK)
            timeline = scenario.web_url(f"/runs/{run.pk}/")
            self.say(f"run {run.pk} started: the agent on {scenario.TASK!r}")
            self.say(f"timeline: {timeline}")
            run = self._watch(run, auto_approve, timeout + 60)
            received = list(upstreams.model.records)
            posted = list(upstreams.webhook)
            mailed = list(mails)
        facts = run_facts(run, scenario.MODEL_GRANT)
        self.say()
        for line in report_lines(run, facts, timeline):
            self.say(line)
        authorized = sum(1 for r in received if r["authorized"])
        self.say(f"  the model server received {len(received)} requests, {authorized} with the real key "
                 "(injected by the gateway; the box held only the sentinel)")
        self.say(f"  the team-chat webhook received {len(posted)} post(s) from the trusted side's executor")
        for line in demo_proposals.report_lines(run, len(posted), len(mailed)):
            self.say(line)
        self.say("")
        self.say("== audit verify")
        result = verify_database()
        self.say(f"  {result.message}")
        self.say(f"demo took {time.time() - began:.0f} s")
        self.say(summary_line(facts, result.ok))
        problems = self._problems(run, facts, received, result.ok)
        if auto_approve and (facts.proposals_executed != 2 or len(posted) != 1 or len(mailed) != 1):
            problems.append("the post and the e-mail were not each performed exactly once")
        if problems:
            raise CommandError("demo failed: " + "; ".join(problems))

    def _watch(self, run: Run, auto_approve: bool, limit: float) -> Run:
        """Until the run has ended and its approved proposals have been performed: approve what it asks
        (--auto-approve) or point a human at the approval page."""
        deadline = time.monotonic() + limit
        shown: set = set()
        approver = scenario.demo_approver() if auto_approve else None
        while run.is_live or Proposal.objects.filter(run=run, status__in=UNSETTLED).exists():
            if time.monotonic() > deadline:
                raise CommandError(f"run {run.pk} still {run.status} after {limit:.0f} s")
            held = [(a.pk, f"{a.request.get('method')} {a.request.get('url')}", approval_wait(a),
                     approval_decide)
                    for a in Approval.objects.filter(run=run, status=Approval.Status.PENDING)]
            held += [(p.pk, f"proposal: {p.kind} to {p.destination.name if p.destination else '-'}",
                      f"it can be approved until {when_text(p.expires_at)}", proposal_decide)
                     for p in Proposal.objects.filter(run=run, status=Proposal.Status.PENDING)]
            for pk, what, wait, decide in held:
                if pk in shown:
                    continue
                shown.add(pk)
                if approver is None:
                    self.say(f"held for approval: {what}")
                    self.say(f"  approve it at {scenario.web_url('/approvals/')} (as an approver; {wait})")
                    continue
                try:
                    decide(pk, approver, True, "cli")
                    self.say(f"approved {what} as {approver.get_username()} (--auto-approve)")
                except (ApprovalClosed, ProposalClosed) as exc:
                    self.say(f"could not approve {what}: {exc}")
            time.sleep(0.2)
            run.refresh_from_db()
        return run

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
