"""What a preset's or a worker's own environment may hold. Roster sets the variables that make the box a
box (its only exit, the CA it trusts, who it is, the sentinels in place of keys): none of them can be
overridden, so no configuration can point a box around the gateway or swap its identity. No value may be
or contain a secret: credentials live in the vault and reach a provider only through a grant (invariant 2).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from django.conf import settings

from controlplane.core.errors import RosterError
from controlplane.vault.services import VaultError, secrets_found_in

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# The proxy, its exceptions, and Node's switch to honour them: a box's only exit is the gateway.
PROXY_VARIABLES = frozenset({
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
    "no_proxy", "NODE_USE_ENV_PROXY",
})
# The trust store a box uses: the gateway's CA is the only way it trusts intercepted TLS.
CA_VARIABLES = frozenset({
    "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO", "NODE_TLS_REJECT_UNAUTHORIZED",
})
IDENTITY_VARIABLES = frozenset({"HOME", "USER", "LOGNAME"})
# Where the box's key sentinels go (controlplane.dispatch.sentinels and each preset's key_variable).
SENTINEL_VARIABLES = frozenset({
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "GEMINI_API_KEY", "GOOGLE_API_KEY",
    "GITHUB_TOKEN", "SLACK_BOT_TOKEN", "AWS_ACCESS_KEY_ID",
})
RESERVED_PREFIXES = ("ROSTER_",)
# Shapes of provider credentials: a value like these belongs in the vault, whatever its name says.
CREDENTIAL_SHAPES = re.compile(
    r"(?:sk-[A-Za-z0-9_-]{16,}|sk-ant-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,}|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{30,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[A-Z0-9]{16}|glpat-[A-Za-z0-9_-]{20,})"
)


def reserved_reason(name: str, *, key_variable: str = "") -> str:
    """Why Roster keeps `name` for itself, or "" when a preset or worker may set it."""
    if name in PROXY_VARIABLES:
        return "Roster sets the proxy variables: a box's only exit is the gateway"
    if name in CA_VARIABLES:
        return "Roster sets the CA variables: a box trusts the gateway's CA and no other"
    if name in IDENTITY_VARIABLES:
        return "Roster sets the box's identity variables"
    if name.startswith(RESERVED_PREFIXES):
        return "ROSTER_* variables are Roster's own"
    if name == key_variable or name in SENTINEL_VARIABLES or name.startswith("ROSTER_SECRET_"):
        return "this variable holds a key's sentinel, set by Roster from the worker's grants"
    return ""


def environment_problems(env: object, *, key_variable: str = "", field: str = "env") -> dict[str, str]:
    """Every problem of an environment mapping (names, reserved names, value types and sizes, values
    shaped like credentials), keyed `env.NAME`; {} when it is fine. The vault check is separate
    (`vault_problems`), because it needs the database and the vault key."""
    if not isinstance(env, Mapping):
        return {field: "must be a table of NAME = \"value\""}
    problems: dict[str, str] = {}
    if len(env) > settings.ROSTER_PRESET_MAX_ENV:
        problems[field] = f"at most {settings.ROSTER_PRESET_MAX_ENV} variables"
    for name, value in env.items():
        where = f"{field}.{name}"
        if not isinstance(name, str) or not NAME_RE.match(name):
            problems[where] = "a variable name is letters, digits and _, not starting with a digit"
            continue
        reserved = reserved_reason(name, key_variable=key_variable)
        if reserved:
            problems[where] = f"cannot be set here: {reserved}"
            continue
        if not isinstance(value, str):
            problems[where] = "the value must be a string"
            continue
        if "\x00" in value or len(value.encode()) > settings.ROSTER_PRESET_MAX_ENV_VALUE_BYTES:
            limit = settings.ROSTER_PRESET_MAX_ENV_VALUE_BYTES
            problems[where] = f"the value must be at most {limit} bytes with no NUL"
            continue
        if CREDENTIAL_SHAPES.search(value):
            problems[where] = ("the value looks like a credential; store it in the vault (`secret set`) and "
                               "grant it, the box gets its sentinel")
    return problems


def vault_problems(texts: Iterable[tuple[str, str]]) -> dict[str, str]:
    """For (where, text) pairs: each place whose text contains a stored secret's value (named, never
    shown). A vault that cannot be read is a problem too: unknown is never taken for "no secret"."""
    pairs = [(where, text) for where, text in texts if isinstance(text, str) and text]
    if not pairs:
        return {}
    try:
        found = secrets_found_in([text for _where, text in pairs])
    except (VaultError, RosterError) as exc:
        return {"vault": f"cannot check against the vault's secrets: {exc}"}
    return {where: (f"contains the value of secret {', '.join(names)}; a box never holds a secret (it gets "
                    "the sentinel through a grant)")
            for (where, _text), names in zip(pairs, found, strict=True) if names}
