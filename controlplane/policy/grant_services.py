"""Writing grants: every create, change and delete goes through here and is audited "grant_change" in
the same transaction. Callers validate first (controlplane.policy.validation)."""

from __future__ import annotations

from django.db import transaction

from controlplane.audit.services import audit_append
from controlplane.policy.models import Grant
from controlplane.policy.validation import GrantSpec, grant_to_data


def grant_save(spec: GrantSpec, *, actor: str = "", via: str = "") -> tuple[Grant, str]:
    """Create or update the grant `spec.slug`. Returns (grant, "created" | "updated" | "unchanged");
    an unchanged grant is not written or audited."""
    with transaction.atomic():
        grant = Grant.objects.select_for_update().filter(slug=spec.slug).first()
        before = grant_to_data(grant) if grant else None
        if grant is None:
            grant = Grant(slug=spec.slug)
        for name, value in spec.values.items():
            setattr(grant, name, value)
        after = grant_to_data(grant)
        if before == after:
            return grant, "unchanged"
        grant.save()
        action = "created" if before is None else "updated"
        audit_append("grant_change", {"slug": grant.slug, "action": action, "by": actor, "via": via,
                                      "before": before, "after": after})
        return grant, action


def grant_delete(grant: Grant, *, actor: str = "", via: str = "") -> None:
    with transaction.atomic():
        before = grant_to_data(grant)
        slug = grant.slug
        grant.delete()
        audit_append("grant_change", {"slug": slug, "action": "deleted", "by": actor, "via": via,
                                      "before": before, "after": None})
