"""The one destination validator, used by the admin form, the TOML files and the CLI. Input is the file
form (docs/proposals.md: `secret` by name, `max_taint` by data-class name); output a DestinationSpec of
model field values, or ValidationFailed naming every bad field."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from urllib.parse import urlsplit

from controlplane.core.errors import ValidationFailed
from controlplane.core.taint import DataClass
from controlplane.policy.validation import FORBIDDEN_INJECT_HEADERS, HEADER_RE

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,47}$")
ADDRESS_RE = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")
DOMAIN_ENTRY_RE = re.compile(r"^@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")
BRANCH_RE = re.compile(r"^[A-Za-z0-9._/*-]{1,200}$")
WEBHOOK_METHODS = ("POST", "PUT", "PATCH")
COMMON_KEYS = frozenset(
    {"kind", "description", "enabled", "secret", "max_taint", "cost_micro", "daily_limit"}
)
KIND_KEYS = {
    "webhook": frozenset({"url", "method", "headers", "secret_header", "secret_format"}),
    "smtp": frozenset({"smtp_host", "smtp_port", "starttls", "login", "from_address", "allowed_recipients"}),
    "git": frozenset({"url", "branch_pattern", "protected_branches"}),
}
# The proposal kind each destination kind takes (a rule for a destination approves only that kind).
PROPOSAL_KIND_FOR_DESTINATION = {"webhook": "webhook", "smtp": "email", "git": "git_push"}
DEFAULTS = {"method": "POST", "secret_format": "{secret}", "starttls": True, "smtp_port": 587}
MAX_LIST = 256
MAX_INT = 2**63 - 1


@dataclass
class DestinationSpec:
    name: str
    values: dict


def _text(data, key, errors, *, limit=2048, required=False) -> str:
    value = data.get(key, DEFAULTS.get(key, ""))
    if not isinstance(value, str):
        errors[key] = f"{key} must be text"
        return ""
    if len(value) > limit:
        errors[key] = f"{key} is longer than {limit} characters"
    if any(ord(c) < 0x20 for c in value) and key != "description":
        errors[key] = f"{key} must not contain control characters"
    if required and not value:
        errors[key] = f"{key} is required for this kind"
    return value


def _int(data, key, errors, default=0, *, low=0, high=MAX_INT) -> int:
    value = data.get(key, DEFAULTS.get(key, default))
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        errors[key] = f"{key} must be a whole number from {low} to {high}"
        return default
    return value


def _strings(data, key, errors) -> list[str]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value) or len(value) > MAX_LIST:
        errors[key] = f"{key} must be a list of at most {MAX_LIST} strings"
        return []
    return list(value)


def recipient_allowed(address: str, allowed: list[str]) -> bool:
    address = address.lower()
    domain = address.rpartition("@")[2]
    return any(entry.lower() == address or entry.lower() == "@" + domain for entry in allowed)


def branch_allowed(branch: str, pattern: str, protected: list[str]) -> str | None:
    """None if a push to `branch` may be proposed, else why not."""
    if any(fnmatchcase(branch, p) for p in protected):
        return f"branch {branch!r} is protected on this destination"
    if pattern and not fnmatchcase(branch, pattern):
        return f"branch {branch!r} does not match the destination's pattern {pattern!r}"
    return None


def _check_url(url: str, kind: str, errors: dict) -> None:
    parts = urlsplit(url)
    schemes = ("http", "https") if kind == "webhook" else ("https", "ssh", "file")
    if parts.scheme not in schemes or (parts.scheme != "file" and not parts.hostname):
        errors["url"] = f"url must be an absolute {' or '.join(schemes)} URL"
    elif parts.password:
        errors["url"] = "url must not carry a password; name a secret instead"


def validate_destination(data: dict, *, name: str) -> DestinationSpec:
    from controlplane.vault.models import Secret

    if not isinstance(data, dict):
        raise ValidationFailed({"destination": "a destination must be a table of fields"})
    errors: dict[str, str] = {}
    values: dict = {}
    if not isinstance(name, str) or not NAME_RE.match(name):
        errors["name"] = f"{name!r} is not a valid name: 1 to 48 characters of a-z, 0-9 and -"
    kind = data.get("kind")
    if kind not in KIND_KEYS:
        raise ValidationFailed({**errors, "kind": "kind must be webhook, smtp or git"})
    values["kind"] = kind
    for key in sorted(set(data) - COMMON_KEYS - KIND_KEYS[kind]):
        errors[key] = f"unknown field {key!r} for a {kind} destination"
    values["description"] = _text(data, "description", errors, limit=10_000)
    enabled = data.get("enabled", True)
    if not isinstance(enabled, bool):
        errors["enabled"] = "enabled must be true or false"
    values["enabled"] = enabled is not False
    try:
        values["max_taint"] = DataClass.parse(data.get("max_taint", "private"))
    except (ValueError, TypeError):
        errors["max_taint"] = "max_taint must be public, private or secret"
    values["cost_micro"] = _int(data, "cost_micro", errors)
    values["daily_limit"] = _int(data, "daily_limit", errors, high=10**9)
    secret_name = data.get("secret")
    values["secret"] = None
    if secret_name is not None:
        values["secret"] = (
            Secret.objects.filter(name=secret_name).first() if isinstance(secret_name, str) else None
        )
        if values["secret"] is None:
            errors["secret"] = f"no secret named {secret_name!r} in the vault"
    for key in (
        "url",
        "method",
        "secret_header",
        "secret_format",
        "smtp_host",
        "login",
        "from_address",
        "branch_pattern",
    ):
        values[key] = ""
    values.update(headers={}, smtp_port=None, starttls=True, allowed_recipients=[], protected_branches=[])
    if kind == "webhook":
        _validate_webhook(data, values, errors)
    elif kind == "smtp":
        _validate_smtp(data, values, errors)
    else:
        _validate_git(data, values, errors)
    if errors:
        raise ValidationFailed(errors)
    return DestinationSpec(name=name, values=values)


def _validate_webhook(data, values, errors) -> None:
    values["url"] = _text(data, "url", errors, required=True)
    if values["url"]:
        _check_url(values["url"], "webhook", errors)
    values["method"] = _text(data, "method", errors)
    if values["method"] not in WEBHOOK_METHODS:
        errors["method"] = f"method must be one of {', '.join(WEBHOOK_METHODS)}"
    headers = data.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and HEADER_RE.match(k) and isinstance(v, str) and v.isprintable()
        for k, v in headers.items()
    ):
        errors["headers"] = "headers must be a table of header names to printable text"
        headers = {}
    elif any(k.lower() in FORBIDDEN_INJECT_HEADERS for k in headers):
        errors["headers"] = "headers may not set Host, Content-Length and other connection headers"
    values["headers"] = dict(headers)
    values["secret_header"] = _text(data, "secret_header", errors, limit=128)
    values["secret_format"] = _text(data, "secret_format", errors, limit=255)
    if values["secret_header"] and not HEADER_RE.match(values["secret_header"]):
        errors["secret_header"] = "secret_header is not a valid header name"
    if bool(values["secret_header"]) != (data.get("secret") is not None):
        errors["secret_header"] = "a webhook's secret and secret_header go together"
    if values["secret_format"].count("{secret}") != 1:
        errors["secret_format"] = "secret_format must contain {secret} exactly once"


def _validate_smtp(data, values, errors) -> None:
    values["smtp_host"] = _text(data, "smtp_host", errors, limit=255, required=True)
    values["smtp_port"] = _int(data, "smtp_port", errors, 587, low=1, high=65535)
    starttls = data.get("starttls", True)
    if not isinstance(starttls, bool):
        errors["starttls"] = "starttls must be true or false"
    values["starttls"] = starttls is not False
    values["login"] = _text(data, "login", errors, limit=255)
    if bool(values["login"]) != (data.get("secret") is not None):
        errors["login"] = "an SMTP login and its secret (the password) go together"
    values["from_address"] = _text(data, "from_address", errors, limit=320, required=True)
    if values["from_address"] and not ADDRESS_RE.match(values["from_address"]):
        errors["from_address"] = "from_address is not an e-mail address"
    allowed = _strings(data, "allowed_recipients", errors)
    bad = [a for a in allowed if not (ADDRESS_RE.match(a) or DOMAIN_ENTRY_RE.match(a))]
    if bad:
        errors["allowed_recipients"] = f"not an address or @domain: {bad[0]!r}"
    values["allowed_recipients"] = allowed


def _validate_git(data, values, errors) -> None:
    values["url"] = _text(data, "url", errors, required=True)
    if values["url"]:
        _check_url(values["url"], "git", errors)
    values["branch_pattern"] = _text(data, "branch_pattern", errors, limit=255)
    protected = _strings(data, "protected_branches", errors)
    for entry in [values["branch_pattern"], *protected]:
        if entry and not BRANCH_RE.match(entry):
            errors["branch_pattern" if entry == values["branch_pattern"] else "protected_branches"] = (
                f"{entry!r} is not a branch name or pattern"
            )
    values["protected_branches"] = protected


def destination_to_data(dest) -> dict:
    """The file form of a saved destination (the inverse of validate_destination)."""
    data: dict = {"kind": dest.kind}
    if dest.description:
        data["description"] = dest.description
    data["enabled"] = dest.enabled
    if dest.secret_id:
        data["secret"] = dest.secret.name
    data["max_taint"] = DataClass(dest.max_taint).label
    data["cost_micro"] = dest.cost_micro
    data["daily_limit"] = dest.daily_limit
    if dest.kind == "webhook":
        data.update(url=dest.url, method=dest.method, headers=dict(dest.headers or {}))
        if dest.secret_header:
            data["secret_header"] = dest.secret_header
        data["secret_format"] = dest.secret_format
    elif dest.kind == "smtp":
        data.update(
            smtp_host=dest.smtp_host,
            smtp_port=dest.smtp_port,
            starttls=dest.starttls,
            from_address=dest.from_address,
            allowed_recipients=list(dest.allowed_recipients or []),
        )
        if dest.login:
            data["login"] = dest.login
    else:
        data.update(
            url=dest.url,
            branch_pattern=dest.branch_pattern,
            protected_branches=list(dest.protected_branches or []),
        )
    return data
