"""Grants and secrets, cached per policy version. Database triggers bump the version on every grant or
secret change (fleet.PolicyVersion), and every decision reads it in the same query that resolves the
token, so a cache hit is never stale."""

from __future__ import annotations

from types import SimpleNamespace

from django.conf import settings
from django.db import connection
from django.db.models import Q

from controlplane.policy import engine
from controlplane.policy.models import Grant
from controlplane.vault.models import Secret

_GRANT_COLUMNS = (
    "id", "slug", "worker_id", "methods", "schemes", "host", "port", "paths", "mcp_tools", "mode",
    "max_taint", "result_class", "untrusted", "expires_at", "secret_id", "secret__name", "inject_header",
    "inject_format", "cost_per_call", "tunnel", "trace", "journal", "enabled", "header_conditions",
    "max_body_size", "wire", "updated_at",
)
_compiled_rules: dict[str, engine.GrantRule] = {}


def _rule_from_row(row: tuple) -> engine.GrantRule:
    # Keyed on every column of the row: any edit, by any path, yields a new key and a fresh compile.
    key = repr(row)
    rule = _compiled_rules.get(key)
    if rule is None:
        fields = dict(zip(_GRANT_COLUMNS, row, strict=True))
        secret_name = fields.pop("secret__name")
        fields["secret"] = SimpleNamespace(name=secret_name) if fields["secret_id"] else None
        fields["pk"] = fields["id"]
        rule = engine.GrantRule.from_model(SimpleNamespace(**fields))
        if len(_compiled_rules) >= settings.ROSTER_GRANT_RULE_CACHE_SIZE:
            _compiled_rules.clear()
        _compiled_rules[key] = rule
    return rule


class PolicyState:
    """Compiled grants per worker and secret rows (ciphertext, never plaintext) for one version."""

    def __init__(self, version: int | None):
        self.version = version
        self.rules: dict[int, list[engine.GrantRule]] = {}
        self.secrets: dict[int, Secret] = {}


_state = PolicyState(None)


def state_for(version: int | None, *, policy_unwritten: bool = False) -> PolicyState:
    """`policy_unwritten`: the caller's open transaction writes no grant or secret (a group of decisions,
    controlplane.egress.db_thread), so what it reads under `version` is committed policy."""
    global _state
    # Unknown version (counter row missing): never cache. Inside a transaction the reads may include
    # this transaction's own uncommitted writes, which a rollback would undo under the same number.
    if version is None or (connection.in_atomic_block and not policy_unwritten):
        return PolicyState(None)
    current = _state
    if current.version != version:
        current = PolicyState(version)
        _state = current  # one reference swap; readers holding the old state finish with it
    return current


def grant_rules_for_worker(worker_id: int, state: PolicyState | None = None) -> list[engine.GrantRule]:
    state = state or PolicyState(None)
    rules = state.rules.get(worker_id)
    if rules is None:
        rows = Grant.objects.filter(Q(worker_id=worker_id) | Q(worker__isnull=True), enabled=True)
        rules = [_rule_from_row(row) for row in rows.values_list(*_GRANT_COLUMNS)]
        state.rules[worker_id] = rules
    return rules


def secret_row(secret_id: int, state: PolicyState) -> Secret:
    secret = state.secrets.get(secret_id)
    if secret is None:
        secret = Secret.objects.only("id", "name", "sentinel", "ciphertext").get(pk=secret_id)
        state.secrets[secret_id] = secret
    return secret
