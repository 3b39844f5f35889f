"""Writing destinations and earned-trust rules: every create, change and delete is audited
"grant_change" (configuration changes, like grants and caps) in the same transaction."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from controlplane.audit.services import audit_append
from controlplane.core.errors import ValidationFailed
from controlplane.proposals.models import Destination, Proposal, TrustRule
from controlplane.proposals.validation import DestinationSpec, destination_to_data


def destination_save(spec: DestinationSpec, *, actor: str = "", via: str = "") -> tuple[Destination, str]:
    """Create or update destination `spec.name`: (destination, "created" | "updated" | "unchanged")."""
    with transaction.atomic():
        dest = Destination.objects.select_for_update().filter(name=spec.name).first()
        before = destination_to_data(dest) if dest else None
        if dest is None:
            dest = Destination(name=spec.name)
        for name, value in spec.values.items():
            setattr(dest, name, value)
        after = destination_to_data(dest)
        if before == after:
            return dest, "unchanged"
        dest.save()
        action = "created" if before is None else "updated"
        audit_append(
            "grant_change",
            {
                "object": "destination",
                "name": dest.name,
                "action": action,
                "by": actor,
                "via": via,
                "before": before,
                "after": after,
            },
        )
        return dest, action


def destination_delete(dest: Destination, *, actor: str = "", via: str = "") -> None:
    with transaction.atomic():
        before = destination_to_data(dest)
        name = dest.name
        dest.delete()
        audit_append(
            "grant_change",
            {
                "object": "destination",
                "name": name,
                "action": "deleted",
                "by": actor,
                "via": via,
                "before": before,
                "after": None,
            },
        )


def _rule_data(rule: TrustRule) -> dict:
    return {
        "worker": rule.worker.name,
        "destination": rule.destination.name,
        "kind": rule.kind,
        "max_per_day": rule.max_per_day,
        "enabled": rule.enabled,
        "expires_at": rule.expires_at.isoformat() if rule.expires_at else None,
    }


def trust_rule_save(rule: TrustRule, *, actor: str = "", via: str = "") -> TrustRule:
    """Validated (identity edits can never be auto-approved) and audited."""
    if rule.kind == Proposal.Kind.IDENTITY_EDIT:
        raise ValidationFailed({"kind": "identity edits always need a human; no rule can approve them"})
    if rule.kind and rule.destination_id and rule.kind != _kind_for(rule.destination.kind):
        raise ValidationFailed(
            {
                "kind": f"a {rule.destination.kind} destination takes "
                f"{_kind_for(rule.destination.kind)} proposals only"
            }
        )
    try:
        rule.full_clean()
    except ValidationError as exc:
        raise ValidationFailed({f: "; ".join(m) for f, m in exc.message_dict.items()}) from None
    with transaction.atomic():
        before = _rule_data(TrustRule.objects.get(pk=rule.pk)) if rule.pk else None
        rule.save()
        audit_append(
            "grant_change",
            {
                "object": "trust_rule",
                "name": rule.name,
                "action": "created" if before is None else "updated",
                "by": actor,
                "via": via,
                "before": before,
                "after": _rule_data(rule),
            },
            worker=rule.worker.name,
        )
    return rule


def trust_rule_delete(rule: TrustRule, *, actor: str = "", via: str = "") -> None:
    with transaction.atomic():
        before = _rule_data(rule)
        name = rule.name
        rule.delete()
        audit_append(
            "grant_change",
            {
                "object": "trust_rule",
                "name": name,
                "action": "deleted",
                "by": actor,
                "via": via,
                "before": before,
                "after": None,
            },
            worker=before["worker"],
        )


PROPOSAL_KIND_FOR_DESTINATION = {"webhook": "webhook", "smtp": "email", "git": "git_push"}


def _kind_for(destination_kind: str) -> str:
    return PROPOSAL_KIND_FOR_DESTINATION[destination_kind]
