"""Writing grants: every create, change and delete goes through here and is audited "grant_change" in
the same transaction (controlplane.audit.edits), under the grant's worker. Callers validate first
(controlplane.policy.validation). Grants as files (docs/grants.md) are `GRANT_FILES`."""

from __future__ import annotations

from controlplane.audit.edits import AuditedModel
from controlplane.core.tomlfiles import TomlFiles
from controlplane.policy.models import Grant
from controlplane.policy.validation import SLUG_RE, GrantSpec, grant_to_data, validate_grant

GRANT_EDITS = AuditedModel(
    "grant", name=lambda grant: grant.slug, describe=grant_to_data,
    worker=lambda grant: grant.worker.name if grant.worker_id else None,
)


def grant_save(spec: GrantSpec, *, actor: str = "", via: str = "") -> tuple[Grant, str]:
    """Create or update the grant `spec.slug`. Returns (grant, "created" | "updated" | "unchanged");
    an unchanged grant is not written or audited."""
    grant = Grant.objects.select_related("worker", "secret").filter(slug=spec.slug).first() or Grant(
        slug=spec.slug)
    for name, value in spec.values.items():
        setattr(grant, name, value)
    return grant, GRANT_EDITS.save(grant, by=actor, via=via)


def grant_delete(grant: Grant, *, actor: str = "", via: str = "") -> None:
    GRANT_EDITS.delete(grant, by=actor, via=via)


GRANT_FILES = TomlFiles(
    "grant", key_pattern=SLUG_RE, validate=lambda data, key: validate_grant(data, slug=key),
    spec_key=lambda spec: spec.slug, save=grant_save, delete=grant_delete,
    stored=lambda: Grant.objects.select_related("worker", "secret").order_by("slug"),
    key_of=lambda grant: grant.slug, to_data=grant_to_data,
)
