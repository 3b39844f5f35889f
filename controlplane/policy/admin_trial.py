"""The grant page's "test a request": the form's unsaved grant as a draft in place of the stored one,
judged by the real engine against every other grant. The answer is shown on the form (as the reason
nothing was saved); nothing is written."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from controlplane.core.errors import RosterError
from controlplane.policy import dry_run, trial
from controlplane.policy.engine import GrantRule
from controlplane.policy.models import Grant
from controlplane.policy.validation import GrantSpec

TRY_FIELDS = ("try_only", "try_worker", "try_method", "try_url", "try_headers", "try_body_size",
              "try_mcp_tool", "try_dry_run_days")


def answer(spec: GrantSpec, cleaned: dict, instance: Grant, *, actor: str = "") -> ValidationError:
    worker, url = cleaned.get("try_worker"), (cleaned.get("try_url") or "").strip()
    draft = GrantRule.from_model(Grant(slug=spec.slug, **spec.values))
    days = cleaned.get("try_dry_run_days")
    replayed = []
    if days:
        report = dry_run.dry_run(dry_run.rules_with_draft(draft, instance.slug or spec.slug), days=days,
                                 actor=actor, source=f"admin draft of grant {spec.slug}")
        replayed = ["Dry-run of this unsaved change:", *report.lines()]
        if worker is None or not url:
            return ValidationError(["Test only, nothing saved (untick the test box to save).", *replayed])
    if worker is None or not url:
        return ValidationError("Nothing saved. To test, choose a worker and give a URL.")
    rules = trial.with_draft(trial.stored_rules(worker), draft, replaces=instance.slug or spec.slug)
    try:
        result = trial.try_request(worker, cleaned.get("try_method") or "GET", url,
                                   mcp_tool=(cleaned.get("try_mcp_tool") or "").strip() or None, rules=rules)
    except RosterError as exc:
        return ValidationError(f"Nothing saved. The test request is not valid: {exc}")
    lines = ["Test only, nothing saved (untick the test box to save).", *trial.explain(result)]
    if cleaned.get("try_headers") or cleaned.get("try_body_size") is not None:
        lines.append("  (headers and body size were given; no grant condition in this version looks at them)")
    return ValidationError([line.strip() for line in lines + replayed])
