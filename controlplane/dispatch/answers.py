"""The run's answer (`Run.answer`), taken on the trusted side from what the box printed, by the run's answer
rule (docs/architecture.md, "The run's input and answer"; the rules: controlplane.agents.answers and
docs/presets.md). The answer is the box's content: untrusted, delivered to the conversation the run serves
as content, never acted on.

Which rule: a run of a worker's agent has its preset's (kept with the run, agents.RunAgent); a run of the
reference agent's command, `reference`; any other command, `none`."""

from __future__ import annotations

from controlplane.agents.answers import AnswerRuleInvalid, answer_from, parse_rule
from controlplane.agents.answers import reference_answer as reference_answer  # re-exported
from controlplane.agents.models import RunAgent
from controlplane.fleet.models import Run

# The reference agent's command (controlplane.dispatch.box.AGENT_COMMAND, kept here to avoid an import
# loop: box imports the run's directories, which import the input assembly).
REFERENCE_AGENT = ("python3", "-m", "workers.agent")


def answer_rule_for(run: Run) -> str:
    """The rule for this run: its preset's; else the reference agent's for its command, none otherwise."""
    preset = RunAgent.objects.filter(run_id=run.pk).values_list("preset", flat=True).first()
    if isinstance(preset, dict) and isinstance(preset.get("answer"), str):
        return preset["answer"]
    return "reference" if tuple(run.command[:3]) == REFERENCE_AGENT else "none"


def run_answer(run: Run, output: str) -> str:
    """The run's answer from its output; a rule that cannot be read finds none (never a guess)."""
    try:
        rule = parse_rule(answer_rule_for(run))
    except AnswerRuleInvalid:
        return ""
    # NUL too: PostgreSQL text refuses it, and a failed final save would lose the run's end.
    return (answer_from(rule, output) or "").replace("\x00", "\ufffd")
