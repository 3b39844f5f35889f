"""`manage.py demo [--auto-approve] [--agent PRESET]`: the reference agent (or a real agent from its
preset: controlplane.demo.agents, `make demo AGENT=`) on real traffic against a running stack
(scripts/demo.sh, `make demo`, starts one), started by a message in a Matrix room and approved from an
approvers' room through the stack's relay (controlplane.demo.chat). Ends with the line
`demo: <m> model calls, <t> tokens metered, <a> allowed, <d> denied, <p> proposals executed,
<n> chat messages relayed, <k> chat approvals, <n> notes, <k> knowledge commits, audit OK`: the chat
run proposes a note, and a second run without conversation writes a knowledge file
(controlplane.demo.knowledge)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from controlplane.agents.selectors import REFERENCE
from controlplane.approvals.models import Approval
from controlplane.audit import checkpoints
from controlplane.core.timefmt import when_text
from controlplane.demo import agents as demo_agents
from controlplane.demo import chat as demo_chat
from controlplane.demo import knowledge as demo_knowledge
from controlplane.demo import proposals as demo_proposals
from controlplane.demo import scenario
from controlplane.demo.report import approval_wait, report_lines, run_facts, summary_line
from controlplane.fleet.models import Run
from controlplane.proposals.models import Proposal
from controlplane.vault.models import Secret

UNSETTLED = (Proposal.Status.PENDING, Proposal.Status.APPROVED, Proposal.Status.EXECUTING)


class Command(BaseCommand):
    help = "Run the reference agent against the scripted model through the gateway, and report."

    def add_arguments(self, parser):
        parser.add_argument("--auto-approve", action="store_true",
                            default=os.environ.get("DEMO_AUTO_APPROVE") == "1",
                            help="approve held requests and proposals as the demo approver, by a "
                                 "reaction in the approvers' room (CI; DEMO_AUTO_APPROVE=1); default: wait "
                                 "for a human")
        parser.add_argument("--agent", default=os.environ.get("AGENT") or REFERENCE,
                            choices=demo_agents.agents(),
                            help="the preset whose agent does the work (its image built: scripts/demo.sh)")
        parser.add_argument("--model-port", type=int, default=18091)
        parser.add_argument("--docs-port", type=int, default=18092)
        parser.add_argument("--ask-port", type=int, default=18093)
        parser.add_argument("--hook-port", type=int, default=18094)
        parser.add_argument("--smtp-port", type=int, default=18095, help="the local mail server")
        parser.add_argument("--timeout", type=int, default=240, help="seconds the run may take")
        parser.add_argument("--synapse-dir", default="var/demo-synapse",
                            help="the demo's Synapse (made afresh each demo)")
        parser.add_argument("--started-at", type=float, default=None, help="epoch seconds the demo began")

    def say(self, line: str = "") -> None:
        self.stdout.write(line)

    def handle(self, *args, **options):
        try:
            self._demo(**options)
        except demo_chat.ChatFailed as exc:
            raise CommandError(f"demo failed: {exc}") from None

    def _demo(self, *args, auto_approve, agent, model_port, docs_port, ask_port, hook_port, smtp_port,
              timeout, synapse_dir, started_at, **_):
        began = started_at or time.time()
        ports = scenario.DemoPorts(model=model_port, docs=docs_port, ask=ask_port, hook=hook_port)
        reference = agent == REFERENCE
        key = demo_agents.demo_key(agent)  # made up now: no real key is needed or used
        steps = None if reference else demo_agents.script(agent, ports)
        task = scenario.TASK if reference else demo_agents.TASK
        with scenario.demo_upstreams(ports, key, steps) as upstreams, \
                demo_proposals.mail_server(smtp_port) as mails:
            if reference:
                worker, grants = scenario.demo_setup(ports, key)
            else:
                worker, grants = demo_agents.setup(agent, ports, key)
            demo_proposals.setup(worker, scenario.DESTINATION, smtp_port)
            demo_knowledge.setup(worker)
            secret = Secret.objects.get(name=scenario.MODEL_SECRET)
            self.say(f"worker {worker.name}, agent {agent}; secret {scenario.MODEL_SECRET} (kind "
                     f"{secret.kind}; the box gets only its sentinel)")
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
            approver = scenario.demo_approver()
            self.say("starting Synapse for the demo (tools/synapse; the stack's relay connects to it)")
            chat_began = time.monotonic()
            with demo_chat.demo_chat(worker, approver, Path(synapse_dir)) as chat:
                self.say(f"Synapse {chat.synapse.url} up, the relay synced and in both rooms in "
                         f"{time.monotonic() - chat_began:.0f} s")
                self.say(f"demo room {chat.room.room_id} (channel {chat.room.name}, Ana and the bot "
                         f"{chat.bot.user_id}); approvers' room {chat.approvers.room_id} (channel "
                         f"{chat.approvers.name}, {chat.approver.user_id} linked to "
                         f"{approver.get_username()})")
                self.say(f"Ana in the demo room: {task}")
                run = demo_chat.ask(chat, task)
                timeline = scenario.web_url(f"/runs/{run.pk}/")
                self.say(f"run {run.pk} started by the relay from Ana's message (origin {run.origin})")
                self.say(f"timeline: {timeline}")
                run = self._watch(run, chat, auto_approve, timeout + 60)
                room = demo_chat.replies(chat, run)
            self.say("a second run, a command with no conversation, writes one file into its /knowledge")
            knowledge_run, store_lines = demo_knowledge.knowledge_run(worker, timeout)
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
        for line in [*store_lines, *demo_knowledge.note_lines(run)]:
            self.say(line)
        notes, commits = demo_knowledge.store_counts([run, knowledge_run])
        self.say("")
        self.say("== the demo room (Matrix, as its members see it; the reply delivered by the relay)")
        self.say(f"  Ana: {task}")
        for text in room:
            self.say(f"  Roster: {text}")
        self.say("")
        # A signed checkpoint before the closing verify (docs/audit.md): the verify then checks the chain
        # against it and says how many records lie after it, so cutting records off the end is caught.
        self.say("== audit checkpoint")
        try:
            statement = checkpoints.make_checkpoint(by="demo")
            self.say(f"  seq {statement['seq']} head {statement['head'][:16]}… signed by key "
                     f"{statement['key']}, appended to {checkpoints.log_path()}")
        except checkpoints.CheckpointError as exc:
            statement = None
            self.say(f"  not made: {exc}")
        self.say("== audit verify")
        result, note = checkpoints.verify_against_latest()
        self.say(f"  {result.message}")
        self.say(f"  {note}")
        self.say(f"demo took {time.time() - began:.0f} s")
        self.say(summary_line(facts, result.ok, notes, commits))
        problems = self._problems(run, facts, received, result.ok)
        if statement is None or f"checkpoint seq {statement['seq']} " not in note:
            problems.append("the closing verify did not check the chain against the demo's signed checkpoint")
        if room != [run.answer]:
            problems.append("the demo room did not get the run's answer exactly once")
        if reference and auto_approve and facts.chat_approvals == 0:
            problems.append("no approval was decided from the approvers' room")
        performed = (facts.proposals_executed, len(posted), len(mailed))
        if reference and auto_approve and performed != (3, 1, 1):
            problems.append("the post, the e-mail and the note were not each performed exactly once")
        # The knowledge run is a plain command whatever the agent; only the reference agent proposes a note.
        if auto_approve and commits != 1:
            problems.append(f"{commits} knowledge commits written, not one")
        if reference and auto_approve and notes != 1:
            problems.append(f"{notes} notes written, not one")
        if problems:
            raise CommandError("demo failed: " + "; ".join(problems))

    def _watch(self, run: Run, chat: demo_chat.DemoChat, auto_approve: bool, limit: float) -> Run:
        """Until the run has ended and its approved proposals have been performed: approve what it asks by
        a reaction on its post in the approvers' room (--auto-approve), or point a human at it."""
        deadline = time.monotonic() + limit
        shown: set = set()
        while run.is_live or Proposal.objects.filter(run=run, status__in=UNSETTLED).exists():
            if time.monotonic() > deadline:
                held = self._held(run, chat)
                unposted = [what for key, what, _, post in held if not post]
                why = (f"; not posted to the approvers' room: {', '.join(unposted)}" if unposted
                       else f"; nobody decided: {', '.join(what for _, what, _, _ in held)}" if held else "")
                state = f"still {run.status}" if run.is_live else f"{run.status}, its proposals unsettled,"
                raise CommandError(f"run {run.pk} {state} after {limit:.0f} s{why}")
            for key, what, wait, post in self._held(run, chat):
                if key in shown or (auto_approve and not post):
                    continue  # the relay posts it within a poll or two
                shown.add(key)
                if not auto_approve:
                    self.say(f"held for approval: {what}")
                    self.say(f"  approve it at {scenario.web_url('/approvals/')} (as an approver), or react "
                             f"{demo_chat.APPROVE} on its post in the approvers' room; {wait}")
                    continue
                demo_chat.approve_in_chat(chat, post)
                self.say(f"approved {what}: {chat.approver.user_id} reacted {demo_chat.APPROVE} on post "
                         f"{post} in the approvers' room (--auto-approve)")
            time.sleep(0.2)
            run.refresh_from_db()
        return run

    @staticmethod
    def _held(run: Run, chat: demo_chat.DemoChat) -> list[tuple]:
        """(key, what, how long it waits in words, its approval post's event id or "") for each pending
        decision."""
        chat_post = demo_chat.approval_post
        held = [(("approval", a.pk), f"{a.request.get('method')} {a.request.get('url')}", approval_wait(a),
                 chat_post(chat, approval=a))
                for a in Approval.objects.filter(run=run, status=Approval.Status.PENDING)]
        held += [(("proposal", p.pk), f"proposal: {p.kind} to {p.destination.name if p.destination else '-'}",
                  f"it can be approved until {when_text(p.expires_at)}", chat_post(chat, proposal=p))
                 for p in Proposal.objects.filter(run=run, status=Proposal.Status.PENDING)]
        return held

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
