"""What a box carries in place of its worker's secrets: each secret's sentinel, under a variable named
after the secret and, for well-known kinds, under the variable tools look for. Never a real value."""

from __future__ import annotations

import re

from django.db.models import Q

from controlplane.fleet.models import Worker
from controlplane.policy.models import Grant
from controlplane.vault.models import Secret

WELL_KNOWN_VARIABLES = {
    Secret.Kind.OPENAI: "OPENAI_API_KEY",
    Secret.Kind.ANTHROPIC: "ANTHROPIC_API_KEY",
    Secret.Kind.GEMINI: "GEMINI_API_KEY",
    Secret.Kind.GITHUB: "GITHUB_TOKEN",
    Secret.Kind.SLACK: "SLACK_BOT_TOKEN",
    Secret.Kind.AWS: "AWS_ACCESS_KEY_ID",
}


def secret_variable(name: str) -> str:
    return "ROSTER_SECRET_" + re.sub(r"[^A-Z0-9]", "_", name.upper())


def worker_secrets(worker: Worker) -> list[Secret]:
    """Secrets named by enabled grants that apply to this worker (its own and the org-wide ones)."""
    secret_ids = (
        Grant.objects.filter(Q(worker=worker) | Q(worker__isnull=True), enabled=True, secret__isnull=False)
        .values_list("secret_id", flat=True)
    )
    return list(Secret.objects.filter(pk__in=secret_ids).only("name", "kind", "sentinel").order_by("name"))


def sentinel_environment(worker: Worker) -> dict[str, str]:
    env: dict[str, str] = {}
    for secret in worker_secrets(worker):
        env[secret_variable(secret.name)] = secret.sentinel
        well_known = WELL_KNOWN_VARIABLES.get(secret.kind)
        if well_known:
            env.setdefault(well_known, secret.sentinel)
    return env
