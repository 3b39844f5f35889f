"""The one grant validator, used by the admin form, the TOML loader and anything else that writes grants.

Input is the file form of a grant (keys as in docs/grants.md: `worker` and `secret` by name, `expires`
as RFC 3339, data classes by name). Output is a GrantSpec holding model field values, or
ValidationFailed naming every bad field with a message that says what is wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from controlplane.core.errors import ValidationFailed
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Worker
from controlplane.policy import conditions, matching
from controlplane.policy.models import Grant
from controlplane.vault.models import Secret
from controlplane.vault.redact import is_credential_name
from controlplane.vault.services import sentinel_secret_ids

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
HEADER_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")
# Headers the gateway manages itself; a secret injected there would break or bypass the proxy.
FORBIDDEN_INJECT_HEADERS = frozenset({
    "host", "proxy-authorization", "content-length", "transfer-encoding", "connection", "upgrade", "te",
    "keep-alive", "trailer", "proxy-connection",
})
# Headers a condition cannot name: the gateway strips the proxy's own before judging, the host is the grant's
# `host`, and the body's framing is judged through `max_body_size`.
FORBIDDEN_CONDITION_HEADERS = frozenset({
    "proxy-authorization", "proxy-connection", "proxy-authenticate", "host", "content-length",
    "transfer-encoding",
})
# A run of token characters this long, with letters and digits, reads like a key or token: a grant's
# conditions are shown on its pages, exported to files and audited, so they never hold one.
CREDENTIAL_LIKE_RE = re.compile(r"(?=[A-Za-z0-9+/=_]*[0-9])(?=[A-Za-z0-9+/=_]*[A-Za-z])[A-Za-z0-9+/=_]{24,}")
# RFC 3339 with a mandatory offset ("Z" or ±hh:mm); seconds required, fractions optional.
RFC3339_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?([Zz]|[+-]\d{2}:\d{2})$")

LIST_FIELDS = ("methods", "schemes", "paths", "mcp_tools")
BOOL_FIELDS = {"untrusted": True, "tunnel": False, "trace": False, "journal": True, "enabled": True}
TAINT_FIELDS = {"max_taint": "private", "result_class": "private"}
KNOWN_KEYS = frozenset({
    "description", "worker", "host", "port", "mode", "expires", "secret", "inject_header", "inject_format",
    "cost_per_call", "header_conditions", "max_body_size", "wire", *LIST_FIELDS, *BOOL_FIELDS, *TAINT_FIELDS,
})
WIRES = frozenset(w for w in Grant.Wire.values if w)
MAX_COST = 2**63 - 1
MAX_LIST = 64


@dataclass
class GrantSpec:
    """Validated model field values for one grant (worker/secret are model instances or None)."""

    slug: str
    values: dict


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_expires(value) -> datetime | None:
    """RFC 3339 text (or a timezone-aware datetime, as TOML gives) to an aware datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("expires needs a timezone offset, e.g. 2026-12-31T23:59:00Z")
        return value
    if not isinstance(value, str) or not RFC3339_RE.match(value):
        raise ValueError(f"expires {value!r} is not RFC 3339 with an offset, e.g. 2026-12-31T23:59:00Z")
    try:
        return datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    except ValueError as exc:
        raise ValueError(f"expires {value!r} is not a real date and time") from exc


def format_expires(value: datetime | None) -> str | None:
    if value is None:
        return None
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def validate_grant(data: dict, *, slug: str, allow_unknown_keys: bool = False) -> GrantSpec:
    """Check one grant in file form. Raises ValidationFailed naming every bad field."""
    errors: dict[str, str] = {}
    values: dict = {}
    if not isinstance(data, dict):
        raise ValidationFailed({"grant": "a grant must be a table of fields"})
    if not isinstance(slug, str) or not SLUG_RE.match(slug):
        errors["slug"] = f"{slug!r} is not a valid id: 1 to 64 characters of a-z, 0-9 and -, starting alnum"
    if not allow_unknown_keys:
        for key in sorted(set(data) - KNOWN_KEYS):
            errors[key] = f"unknown field {key!r}; known fields: {', '.join(sorted(KNOWN_KEYS))}"

    description = data.get("description", "")
    if not isinstance(description, str):
        errors["description"] = "description must be text"
    values["description"] = description if isinstance(description, str) else ""

    for name in LIST_FIELDS:
        raw = data.get(name, [])
        if not isinstance(raw, list | tuple) or not all(isinstance(x, str) for x in raw):
            errors[name] = f"{name} must be a list of strings"
            raw = []
        elif len(raw) > MAX_LIST:
            errors[name] = f"{name} has more than {MAX_LIST} entries"
        elif len(set(raw)) != len(raw):
            errors[name] = f"{name} lists the same entry twice"
        values[name] = list(raw)
    for method in values["methods"]:
        if method not in matching.HTTP_METHODS:
            known = ", ".join(sorted(matching.HTTP_METHODS))
            errors["methods"] = f"unknown method {method!r}; expected upper-case one of {known}"
    for scheme in values["schemes"]:
        if scheme not in matching.GRANT_SCHEMES:
            errors["schemes"] = f"unknown scheme {scheme!r}; expected http or https"
    for pattern in values["paths"]:
        try:
            matching.compile_path_pattern(pattern)
        except matching.PatternError as exc:
            errors["paths"] = str(exc)
    for tool in values["mcp_tools"]:
        if not matching.TOOL_RE.match(tool):
            errors["mcp_tools"] = f"MCP tool name {tool!r} is not valid (letters, digits, _ . : / -)"

    host = data.get("host")
    if host is None or host == "":
        errors["host"] = "host is required (exact host or *.example.com)"
    elif not isinstance(host, str):
        errors["host"] = "host must be text"
    else:
        try:
            matching.parse_host_pattern(host)
        except matching.PatternError as exc:
            errors["host"] = f"bad host pattern: {exc}"
    values["host"] = host if isinstance(host, str) else ""

    port = data.get("port")
    if port is not None and (not _is_int(port) or not 1 <= port <= 65535):
        errors["port"] = f"port {port!r} is out of range 1-65535"
    values["port"] = port if _is_int(port) else None

    mode = data.get("mode", "auto")
    if mode not in ("auto", "ask", "deny"):
        errors["mode"] = f"mode {mode!r} must be auto, ask or deny"
    values["mode"] = mode

    for name, default in TAINT_FIELDS.items():
        raw = data.get(name, default)
        try:
            values[name] = DataClass.parse(raw) if isinstance(raw, str) else DataClass.parse("")
        except ValueError:
            errors[name] = f"{name} {raw!r} must be public, private or secret"
    for name, default in BOOL_FIELDS.items():
        raw = data.get(name, default)
        if not isinstance(raw, bool):
            errors[name] = f"{name} must be true or false"
        values[name] = raw if isinstance(raw, bool) else default

    cost = data.get("cost_per_call", 0)
    if not _is_int(cost) or not 0 <= cost <= MAX_COST:
        errors["cost_per_call"] = "cost_per_call must be a whole number of units, 0 or more"
    values["cost_per_call"] = cost if _is_int(cost) else 0

    try:
        values["expires_at"] = parse_expires(data.get("expires"))
    except ValueError as exc:
        errors["expires"] = str(exc)

    values["worker"] = None
    worker = data.get("worker")
    if worker is not None:
        if not isinstance(worker, str) or not worker:
            errors["worker"] = "worker must be a worker's name (or absent for every worker)"
        else:
            values["worker"] = Worker.objects.filter(name=worker).first()
            if values["worker"] is None:
                errors["worker"] = f"unknown worker {worker!r}"

    values["secret"] = None
    secret = data.get("secret")
    header = data.get("inject_header", "")
    fmt = data.get("inject_format", "{secret}")
    if secret is not None:
        if not isinstance(secret, str) or not secret:
            errors["secret"] = "secret must be a secret's name (or absent)"
        else:
            values["secret"] = Secret.objects.filter(name=secret).first()
            if values["secret"] is None:
                errors["secret"] = f"unknown secret {secret!r}; create it with `manage.py secret set`"
    if not isinstance(header, str):
        errors["inject_header"] = "inject_header must be text"
        header = ""
    if not isinstance(fmt, str):
        errors["inject_format"] = "inject_format must be text"
        fmt = "{secret}"
    if secret is not None and not header:
        errors["inject_header"] = "a grant that names a secret needs inject_header (e.g. authorization)"
    if header and secret is None:
        errors["inject_header"] = "inject_header is set but no secret is named"
    if header and not HEADER_RE.match(header):
        errors["inject_header"] = f"inject_header {header!r} is not a valid header name"
    elif header.lower() in FORBIDDEN_INJECT_HEADERS:
        errors["inject_header"] = f"inject_header {header!r} is the gateway's own; it cannot carry a secret"
    if fmt.count("{secret}") != 1 or "{" in fmt.replace("{secret}", "") or "}" in fmt.replace("{secret}", ""):
        errors["inject_format"] = "inject_format must contain {secret} exactly once and no other braces"
    elif any(ord(c) < 0x20 or ord(c) == 0x7F for c in fmt):
        errors["inject_format"] = "inject_format must not contain control characters or newlines"
    values["inject_header"] = header.lower()
    values["inject_format"] = fmt

    try:
        values["header_conditions"] = clean_header_conditions(data.get("header_conditions", []))
    except ValueError as exc:
        errors["header_conditions"] = str(exc)
        values["header_conditions"] = []
    size = data.get("max_body_size")
    values["max_body_size"] = size if _is_int(size) else None
    if size is not None and (not _is_int(size) or not 0 <= size <= conditions.MAX_BODY_SIZE):
        errors["max_body_size"] = "max_body_size must be a whole number of bytes, 0 or more (or absent)"
    elif size is not None and mode == "deny":
        errors["max_body_size"] = ("a deny grant covers every body size; max_body_size limits what an allow "
                                   "or ask grant lets through")

    wire = data.get("wire", "")
    if wire != "" and wire not in WIRES:
        known = ", ".join(sorted(WIRES))
        errors["wire"] = f"unknown wire format {wire!r}; expected one of {known} (or absent)"
    values["wire"] = wire if wire in WIRES else ""

    if values["tunnel"] is True:
        if values["header_conditions"] or size is not None:
            errors["header_conditions" if values["header_conditions"] else "max_body_size"] = (
                "a tunnel grant is judged on host and port only; it cannot judge headers or body size")
        for name in ("paths", "methods", "mcp_tools", "schemes"):
            if values[name]:
                errors[name] = f"a tunnel grant is judged on host and port only; {name} must be empty"
        if secret is not None:
            errors["secret"] = "a tunnel grant cannot inject a secret (the gateway does not see inside)"
        if values["trace"]:
            errors["trace"] = "a tunnel grant cannot trace bodies (the gateway does not see inside)"

    if errors:
        raise ValidationFailed(errors)
    return GrantSpec(slug=slug, values=values)


def clean_header_conditions(raw) -> list[dict]:
    """Header conditions in file form to stored form: names lower-cased, each checked; ValueError names
    the first problem. Values are checked for what must never be stored in a grant (a credential)."""
    if not isinstance(raw, list | tuple):
        raise ValueError('header_conditions must be a list of tables like {name = "content-type", '
                         'equals = "application/json"}')
    if len(raw) > conditions.MAX_CONDITIONS:
        raise ValueError(f"at most {conditions.MAX_CONDITIONS} header conditions")
    cleaned = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ValueError("each header condition is a table with a `name` and one of "
                             + ", ".join(conditions.OPS))
        name = item["name"].lower()
        ops = [op for op in conditions.OPS if op in item]
        extra = sorted(set(item) - {"name", *conditions.OPS})
        if not HEADER_RE.match(name):
            raise ValueError(f"header name {item['name']!r} is not a valid header name")
        if extra or len(ops) != 1:
            raise ValueError(f"header {name}: give exactly one of {', '.join(conditions.OPS)}"
                             + (f" (unknown: {', '.join(extra)})" if extra else ""))
        if name in FORBIDDEN_CONDITION_HEADERS:
            raise ValueError(f"header {name} is the gateway's own (or judged through host and "
                             "max_body_size); a condition cannot name it")
        op, value = ops[0], item[ops[0]]
        if op in conditions.VALUE_OPS:
            _check_condition_value(name, op, value)
        elif value is not True:
            raise ValueError(f"header {name}: write {op} = true")
        cleaned.append({"name": name, op: value})
    try:
        conditions.compile_conditions(cleaned)
    except conditions.ConditionError as exc:
        raise ValueError(str(exc)) from None
    return cleaned


def _check_condition_value(name: str, op: str, value) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"header {name}: {op} needs non-empty text")
    if is_credential_name(name):
        raise ValueError(f"header {name} carries a credential: a condition on it can only be present or "
                         "absent (a grant's conditions are shown, exported and audited)")
    if CREDENTIAL_LIKE_RE.search(value) or sentinel_secret_ids([value]):
        raise ValueError(f"header {name}: the {op} value looks like a credential; a grant's conditions are "
                         "shown, exported and audited, so they never hold one (use present or absent)")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise ValueError(f"header {name}: the {op} value must not contain control characters or newlines")
    if op == "equals" and value != value.strip(" \t"):
        raise ValueError(f"header {name}: the value has spaces at an end, which HTTP strips; it never equals")
    if op == "equals" and len(value) > conditions.MAX_VALUE_CHARS:
        raise ValueError(f"header {name}: a value is at most {conditions.MAX_VALUE_CHARS} characters")
    if op == "matches":
        try:
            conditions.compile_pattern(value)
        except conditions.ConditionError as exc:
            raise ValueError(f"header {name}: {exc}") from None


def grant_to_data(grant) -> dict:
    """The file form of a Grant model instance (what `grants export` writes; validate_grant reads it)."""
    data: dict = {"host": grant.host}
    if grant.description:
        data["description"] = grant.description
    if grant.worker_id is not None:
        data["worker"] = grant.worker.name
    if grant.port is not None:
        data["port"] = grant.port
    for name in LIST_FIELDS:
        data[name] = list(getattr(grant, name) or [])
    data["mode"] = grant.mode
    data["max_taint"] = DataClass(grant.max_taint).label
    data["result_class"] = DataClass(grant.result_class).label
    for name in BOOL_FIELDS:
        data[name] = bool(getattr(grant, name))
    data["cost_per_call"] = int(grant.cost_per_call)
    if grant.expires_at is not None:
        data["expires"] = format_expires(grant.expires_at)
    if grant.secret_id is not None:
        data["secret"] = grant.secret.name
    if grant.inject_header:
        data["inject_header"] = grant.inject_header
    if grant.inject_format != "{secret}":
        data["inject_format"] = grant.inject_format
    if grant.header_conditions:
        data["header_conditions"] = [dict(c) for c in grant.header_conditions]
    if grant.max_body_size is not None:
        data["max_body_size"] = int(grant.max_body_size)
    if grant.wire:
        data["wire"] = grant.wire
    return data
