"""Writing destinations and earned-trust rules: every create, change and delete is audited
"grant_change" (configuration changes, like grants and caps) in the same transaction, through
controlplane.audit.edits. Destinations as files (docs/proposals.md) are `DESTINATION_FILES`."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.utils import timezone

from controlplane.audit.edits import AuditedModel
from controlplane.core.errors import ValidationFailed
from controlplane.core.timefmt import when_text
from controlplane.core.tomlfiles import TomlFiles
from controlplane.proposals.models import Destination, Proposal, TrustRule
from controlplane.proposals.validation import (
    NAME_RE,
    PROPOSAL_KIND_FOR_DESTINATION,
    DestinationSpec,
    destination_to_data,
    validate_destination,
)

# A webhook's URL (Slack's and most others' carry their token in the path) and its extra headers are
# credential-like: the record names their change, masked (docs/audit.md, admin edits).
DESTINATION_EDITS = AuditedModel("destination", name=lambda dest: dest.name, describe=destination_to_data,
                                 masked=frozenset({"url", "headers"}))


def _rule_data(rule: TrustRule) -> dict:
    return {
        "worker": rule.worker.name,
        "destination": rule.destination.name if rule.destination_id else None,
        "kind": rule.kind,
        "max_per_day": rule.max_per_day,
        "enabled": rule.enabled,
        "expires_at": rule.expires_at.isoformat() if rule.expires_at else None,
    }


TRUST_RULE_EDITS = AuditedModel("trust_rule", name=lambda rule: rule.name, describe=_rule_data,
                                worker=lambda rule: rule.worker.name)


def destination_save(spec: DestinationSpec, *, actor: str = "", via: str = "") -> tuple[Destination, str]:
    """Create or update destination `spec.name`: (destination, "created" | "updated" | "unchanged")."""
    dest = Destination.objects.select_related("secret").filter(name=spec.name).first() or Destination(
        name=spec.name)
    for name, value in spec.values.items():
        setattr(dest, name, value)
    return dest, DESTINATION_EDITS.save(dest, by=actor, via=via)


def destination_delete(dest: Destination, *, actor: str = "", via: str = "") -> None:
    DESTINATION_EDITS.delete(dest, by=actor, via=via)


def trust_rule_save(rule: TrustRule, *, actor: str = "", via: str = "") -> TrustRule:
    """Validated (identity edits can never be auto-approved) and audited."""
    if rule.kind == Proposal.Kind.IDENTITY_EDIT:
        raise ValidationFailed({"kind": "identity edits always need a human; no rule can approve them"})
    expired = trust_rule_expiry_problem(rule)
    if expired:
        raise ValidationFailed({"expires_at": expired})
    if rule.kind and rule.destination_id:
        takes = PROPOSAL_KIND_FOR_DESTINATION[rule.destination.kind]
        if rule.kind != takes:
            raise ValidationFailed(
                {"kind": f"a {rule.destination.kind} destination takes {takes} proposals only"})
    try:
        rule.full_clean()
    except ValidationError as exc:
        raise ValidationFailed({f: "; ".join(m) for f, m in exc.message_dict.items()}) from None
    TRUST_RULE_EDITS.save(rule, by=actor, via=via)
    return rule


def trust_rule_expiry_problem(rule: TrustRule) -> str:
    """Why a rule's expiry is refused, or "": a new expiry in the past would save a rule that never
    approves anything while reading as earned trust. A stored rule that has since expired may still be
    edited (disabled, renamed) without moving its expiry."""
    if rule.expires_at is None or rule.expires_at > timezone.now():
        return ""
    if rule.pk and TrustRule.objects.filter(pk=rule.pk, expires_at=rule.expires_at).exists():
        return ""
    return (f"{when_text(rule.expires_at)} has already passed: the rule would never approve anything "
            "(leave it blank for no expiry)")


def trust_rule_delete(rule: TrustRule, *, actor: str = "", via: str = "") -> None:
    TRUST_RULE_EDITS.delete(rule, by=actor, via=via)


DESTINATION_FILES = TomlFiles(
    "destination", key_pattern=NAME_RE, validate=lambda data, key: validate_destination(data, name=key),
    spec_key=lambda spec: spec.name, save=destination_save, delete=destination_delete,
    stored=lambda: Destination.objects.select_related("secret").order_by("name"),
    key_of=lambda dest: dest.name, to_data=destination_to_data,
)
