"""The grant page's "test a request": the form's unsaved grant as a draft in place of the stored one,
judged by the real engine against every other grant. The answer is a result panel above the form (never
a form error: errors are for bad input); nothing is written but a dry-run's own audit record."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError

from controlplane.core.errors import RosterError
from controlplane.policy import dry_run, trial
from controlplane.policy.engine import GrantRule
from controlplane.policy.models import Grant
from controlplane.policy.validation import GrantSpec

TRY_FIELDS = ("try_only", "try_worker", "try_method", "try_url", "try_headers", "try_body_size",
              "try_mcp_tool", "try_dry_run_days")
NOTHING_SAVED = "Test only, nothing saved (untick the test box to save)."


@dataclass(frozen=True)
class TrialPanel:
    """What the page shows above the form after a test: the verdict's words and the explanation."""

    verdict: str  # allow | deny | ask, or "" for a dry-run alone
    lines: list[str] = field(default_factory=list)


def answer(spec: GrantSpec, cleaned: dict, instance: Grant, *, actor: str = "") -> TrialPanel:
    """The trial's answer for the page. Raises ValidationError (a form error) only for bad input."""
    worker, url = cleaned.get("try_worker"), (cleaned.get("try_url") or "").strip()
    draft = GrantRule.from_model(Grant(slug=spec.slug, **spec.values))
    days = cleaned.get("try_dry_run_days")
    replayed = []
    if days:
        report = dry_run.dry_run(dry_run.rules_with_draft(draft, instance.slug or spec.slug), days=days,
                                 actor=actor, source=f"admin draft of grant {spec.slug}")
        replayed = ["Dry-run of this unsaved change:", *report.lines()]
        if worker is None or not url:
            return TrialPanel("", [NOTHING_SAVED, *replayed])
    if worker is None or not url:
        raise ValidationError("Nothing tested or saved. To test, choose a worker and give a URL.")
    rules = trial.with_draft(trial.stored_rules(worker), draft, replaces=instance.slug or spec.slug)
    try:
        result = trial.try_request(worker, cleaned.get("try_method") or "GET", url,
                                   mcp_tool=(cleaned.get("try_mcp_tool") or "").strip() or None, rules=rules,
                                   headers=(cleaned.get("try_headers") or "").splitlines(),
                                   body_size=cleaned.get("try_body_size") or 0)
    except RosterError as exc:
        raise ValidationError(f"Nothing tested or saved. The test request is not valid: {exc}") from None
    lines = [NOTHING_SAVED, *(line.strip() for line in trial.explain(result))]
    return TrialPanel(result.verdict, lines + replayed)
