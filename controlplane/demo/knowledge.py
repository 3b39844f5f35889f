"""`make demo`'s worker stores (docs/knowledge.md, docs/memory.md): the chat run proposes one note for its
channel (held for a person: the run read untrusted pages, so no rule applies, and the demo approver allows
it from the approvers' room), and a second run, with no conversation, writes one file into its writable
knowledge checkout; the change, collected when that box ends, is committed by the trusted side under an
admin's earned-trust rule for knowledge changes (the run read nothing untrusted)."""

from __future__ import annotations

import time

from controlplane.dispatch.starting import run_start
from controlplane.fleet.models import Run, Worker
from controlplane.knowledge import repo as git
from controlplane.knowledge.models import Commit
from controlplane.memory.models import Note
from controlplane.proposals.models import Proposal, TrustRule
from controlplane.proposals.services import trust_rule_save

KNOWLEDGE_RULE = "demo-knowledge-trusted"
KNOWLEDGE_FILE = "releases/1.4.md"
KNOWLEDGE_TEXT = "Release 1.4 ships on Friday; the deploy pipeline was green when checked.\n"
NOTE_TEXT = "This room wants release summaries posted to the team chat and mailed to the team."


def note_step() -> dict:
    """The scripted model's step: the agent proposes a note for the channel it serves."""
    return {"say": "I'll remember how this room likes its summaries.", "tool": "propose",
            "arguments": {"kind": "memory_note", "payload": {"scope": "channel", "text": NOTE_TEXT},
                          "reason": "the room asked for this twice"}}


def setup(worker: Worker) -> None:
    rule = TrustRule.objects.filter(name=KNOWLEDGE_RULE).first() or TrustRule(name=KNOWLEDGE_RULE)
    rule.worker, rule.destination, rule.kind, rule.max_per_day, rule.enabled = (
        worker, None, Proposal.Kind.KNOWLEDGE_CHANGE, 50, True)
    trust_rule_save(rule, actor="make demo", via="demo")


def knowledge_run(worker: Worker, timeout: float) -> tuple[Run, list[str]]:
    """The second run: one file into /knowledge, then its commit. Returns the run and the report's lines."""
    script = (f"import os; os.makedirs('/knowledge/releases', exist_ok=True); "
              f"open('/knowledge/{KNOWLEDGE_FILE}', 'w').write({KNOWLEDGE_TEXT!r}); "
              f"print('wrote /knowledge/{KNOWLEDGE_FILE}')")
    run = run_start(worker, ["python3", "-c", script], timeout=60, task="write the release note")
    deadline = time.monotonic() + timeout
    while True:
        run.refresh_from_db()
        proposal = Proposal.objects.filter(run=run, kind=Proposal.Kind.KNOWLEDGE_CHANGE).first()
        settled = proposal is not None and proposal.status in (
            Proposal.Status.EXECUTED, Proposal.Status.FAILED, Proposal.Status.REFUSED)
        if (not run.is_live and settled) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    lines = ["", "== the worker's stores (memory and knowledge)",
             f"  run {run.pk} (a command, no conversation: its /knowledge is writable): {run.status}"]
    if proposal is None:
        lines.append("  no knowledge change was proposed")
        return run, lines
    rule = proposal.trust_rule.name if proposal.trust_rule_id else "nobody"
    lines.append(f"  knowledge_change {str(proposal.pk)[:8]}: {proposal.status} (approved by {rule}), "
                 f"{(proposal.result or {}).get('summary', '')}")
    commit = Commit.objects.filter(run=run).first()
    if commit is not None:
        message = git.log(git.repo_path(worker.name), limit=1, path=KNOWLEDGE_FILE)[0].message
        lines += [f"  commit {commit.sha[:12]}: {KNOWLEDGE_FILE}"] + [
            f"    {line}" for line in message.splitlines() if line.startswith("Roster-")]
    return run, lines


def store_counts(runs: list[Run]) -> tuple[int, int]:
    """Notes and knowledge commits the demo's runs wrote (from the stores' own records)."""
    notes = Note.objects.filter(written_by_run__in=runs, forgotten_at__isnull=True).count()
    return notes, Commit.objects.filter(run__in=runs, kind=Commit.Kind.CHANGE).count()


def note_lines(run: Run) -> list[str]:
    return [f"  note {n.pk} ({n.scope_label}): {n.provenance}"
            for n in Note.objects.filter(written_by_run=run).select_related("worker")]
