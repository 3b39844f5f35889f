"""A plain-language preview of what one grant matches: a sentence and example URLs that do and don't
match, computed with the real matcher (shown read-only on the grant's admin page)."""

from __future__ import annotations

from controlplane.policy import matching
from controlplane.policy.engine import GrantRule, McpCall
from controlplane.policy.normalize import DEFAULT_PORTS

MAX_EXAMPLES = 8


def describe(rule: GrantRule, worker_name: str | None = None) -> str:
    if rule.broken:
        return f"This grant is broken and makes every request deny: {rule.broken}"
    verb = {"auto": "Allows", "ask": "Asks a human about", "deny": "Denies"}[rule.mode]
    methods = "/".join(rule.methods) if rule.methods else "any-method"
    who = f"worker {worker_name}" if worker_name else "every worker"
    if rule.tunnel:
        target = f"CONNECT tunnels to {rule.host}:{rule.port or DEFAULT_PORTS['tunnel']} (no interception)"
    else:
        schemes = "/".join(rule.schemes or matching.DEFAULT_GRANT_SCHEMES)
        port = f":{rule.port}" if rule.port else " on the scheme's default port"
        paths = ", ".join(rule.paths) if rule.paths else "any path"
        target = f"{methods} {schemes} requests to {rule.host}{port}, paths {paths}"
        if rule.mcp_tools:
            target += f", MCP tools {', '.join(rule.mcp_tools)} only"
    parts = [f"{verb} {target} from {who}, while the run's taint is at most {rule.max_taint.label}."]
    if rule.compiled.conditions:
        joined = "; ".join(c.describe() for c in rule.compiled.conditions)
        parts.append(f"Only when {joined} (judged on the box's headers; "
                     + ("any line of a repeated header counts)." if rule.mode == "deny"
                        else "a repeated header must meet it on every line)."))
    if rule.max_body_size is not None:
        parts.append(f"Only for a body of at most {rule.max_body_size} bytes.")
    if rule.mode != "deny":
        parts.append(f"Results count as {rule.result_class.label}"
                     + (" and mark the run untrusted." if rule.untrusted else "."))
    if rule.secret_name:
        parts.append(f"Injects secret {rule.secret_name} as header {rule.inject_header}: "
                     f"{rule.inject_format}.")
    if rule.expires_at:
        parts.append(f"Expires {rule.expires_at.isoformat()}.")
    if not rule.enabled:
        parts.append("Disabled: it matches nothing until enabled.")
    return " ".join(parts)


def _example_hosts(rule: GrantRule) -> list[str]:
    host = rule.compiled.host
    if rule.compiled.wildcard:
        return [f"api.{host}", f"a.b.{host}", host, f"{host}.evil.example"]
    return [host, f"www.{host}" if not host.startswith("[") else "[::2]", f"{host}.evil.example"]


def _example_paths(rule: GrantRule) -> list[str]:
    out = []
    for pattern in rule.paths[:3]:
        deep = pattern.endswith("/**")
        out.append(pattern[:-3].replace("*", "x") + "/a/b" if deep else pattern.replace("*", "x"))
    out.append("/other/path" if rule.paths else "/any/path")
    return out


def _example_headers(rule: GrantRule) -> dict[str, tuple[str, ...]]:
    """Headers that meet the grant's conditions where an example value is obvious (present: "x";
    equals: the value); a `matches` condition is met only by a value the admin wrote, so it is left out
    and the examples then show what a request without that header gets."""
    out: dict[str, tuple[str, ...]] = {}
    for condition in rule.compiled.conditions:
        if condition.op == "present":
            out[condition.name] = ("x",)
        elif condition.op == "equals":
            out[condition.name] = (condition.value,)
    return out


def examples(rule: GrantRule) -> list[tuple[str, bool]]:
    """(URL, matches) pairs for a request that meets the grant's header conditions where it can and has
    no body; the method is the grant's first listed method (or GET)."""
    if rule.broken or rule.compiled is None:
        return []
    method = "CONNECT" if rule.tunnel else (rule.methods[0] if rule.methods else "GET")
    scheme = "tunnel" if rule.tunnel else (rule.schemes or matching.DEFAULT_GRANT_SCHEMES)[0]
    port = rule.port or DEFAULT_PORTS[scheme]
    paths = ["/"] if rule.tunnel else _example_paths(rule)
    candidates = [(h, port, p) for h in _example_hosts(rule) for p in paths]
    other_port = port + 1 if port < 65535 else port - 1
    candidates.append((_example_hosts(rule)[0], other_port, paths[0]))
    mcp = (McpCall(matching.MCP_TOOL_CALL, rule.mcp_tools[0]),) if rule.mcp_tools else ()
    headers = _example_headers(rule)
    out = []
    for host, p, path in candidates:
        spec = matching.match(rule.compiled, worker_id=rule.worker_id, method=method, scheme=scheme,
                              host=host, port=p, path=path, mcp=mcp, headers=headers, body_size=0)
        shown = f"{host}:{p}" if rule.tunnel else f"{method} {scheme}://{host}:{p}{path}"
        out.append((shown, spec is not None))
    matched = [e for e in out if e[1]][: MAX_EXAMPLES // 2]
    unmatched = [e for e in out if not e[1]][: MAX_EXAMPLES - len(matched)]
    return matched + unmatched
