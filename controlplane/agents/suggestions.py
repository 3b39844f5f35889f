"""The grant a worker's preset suggests: its provider's model paths on the worker's base URL, with the
model key injected and traced. Offered (admin, `preset suggest-grants`); only a human saves it, through
the audited grant services, and it is an ordinary grant from then on (docs/grants.md)."""

from __future__ import annotations

from urllib.parse import urlsplit

import tomli_w

from controlplane.agents import placeholders
from controlplane.agents.rendering import base_path, resolved_base_url
from controlplane.agents.selectors import AgentChoice
from controlplane.core.errors import RosterError
from controlplane.fleet.models import Worker
from controlplane.policy.grant_services import grant_save
from controlplane.policy.models import Grant
from controlplane.policy.validation import GrantSpec, validate_grant
from controlplane.vault.models import Secret

# The vault kind of a key each wire format's provider issues (a sentinel shaped like it).
KIND_FOR_WIRE = {"openai-chat": Secret.Kind.OPENAI, "openai-responses": Secret.Kind.OPENAI,
                 "anthropic-messages": Secret.Kind.ANTHROPIC, "gemini": Secret.Kind.GEMINI}


def suggested_slug(worker: Worker, choice: AgentChoice) -> str:
    return f"{worker.name}-{choice.preset.slug}-model"[:64].rstrip("-")


def suggested_grant_data(worker: Worker, choice: AgentChoice, secret: str) -> dict:
    """The suggested grant in file form (docs/grants.md), for `secret` (a vault secret's name)."""
    suggestion = choice.spec.suggested_grant
    if suggestion is None:
        raise RosterError(f"preset {choice.preset.slug} suggests no grant; write one (docs/grants.md)")
    url = resolved_base_url(choice.spec, choice.base_url)
    parts = urlsplit(url)
    data = {"description": f"{choice.preset.title}: model calls for {worker.name} (suggested by the preset)",
            "worker": worker.name, "host": parts.hostname or "", "schemes": [parts.scheme],
            "methods": list(suggestion.methods),
            "paths": [placeholders.fill(p, {"base_path": base_path(url)}) for p in suggestion.paths],
            "secret": secret, "inject_header": suggestion.inject_header,
            "inject_format": suggestion.inject_format, "trace": suggestion.trace, "wire": choice.spec.wire,
            "mode": "auto"}
    if parts.port is not None:
        data["port"] = parts.port
    return data


def suggested_grant_spec(worker: Worker, choice: AgentChoice, secret: str) -> GrantSpec:
    data = suggested_grant_data(worker, choice, secret)
    return validate_grant(data, slug=suggested_slug(worker, choice))


def suggested_grant_toml(worker: Worker, choice: AgentChoice, secret: str) -> str:
    slug = suggested_slug(worker, choice)
    return f"# {slug}.toml\n" + tomli_w.dumps(suggested_grant_data(worker, choice, secret))


def kind_note(choice: AgentChoice, secret: Secret | None) -> str:
    """A word when the secret's kind is not the one this wire format's provider issues ("" if it is)."""
    want = KIND_FOR_WIRE.get(choice.spec.wire)
    if secret is None or want is None or secret.kind in (want, Secret.Kind.GENERIC):
        return ""
    return (f"note: secret {secret.name} is of kind {secret.kind}; a {choice.spec.wire} provider's key is "
            f"kind {want} (its sentinel is shaped like the real key, which some agents check)")


def suggested_grant_save(worker: Worker, choice: AgentChoice, secret: str, *, by: str,
                         via: str) -> tuple[Grant, str]:
    """Save the suggestion as the human's grant (validated, audited `grant_change`)."""
    return grant_save(suggested_grant_spec(worker, choice, secret), actor=by, via=via)
