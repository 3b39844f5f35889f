"""A plain-language preview of what one grant matches: a sentence and example URLs that do and don't
match, computed with the real matcher (shown read-only on the grant's admin page). The examples are
built in controlplane.policy.preview_requests; the warning about internal IP literals reads the
gateway's list of private upstreams (controlplane.core.gateway_health)."""

from __future__ import annotations

from controlplane.core.gateway_health import GatewayHealth, gateway_health, internal_literal, literal_listed
from controlplane.policy import matching, preview_requests
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
    # A deny applies whatever the run's taint (the engine picks a matching deny before it looks at taint).
    when = ("at any taint" if rule.mode == "deny"
            else f"while the run's taint is at most {rule.max_taint.label}")
    parts = [f"{verb} {target} from {who}, {when}."]
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


def _example_paths(rule: GrantRule) -> list[str]:
    out = []
    for pattern in rule.paths[:3]:
        deep = pattern.endswith("/**")
        out.append(pattern[:-3].replace("*", "x") + "/a/b" if deep else pattern.replace("*", "x"))
    out.append("/other/path" if rule.paths else "/any/path")
    return out


def _grant_port(rule: GrantRule) -> int:
    scheme = "tunnel" if rule.tunnel else (rule.schemes or matching.DEFAULT_GRANT_SCHEMES)[0]
    return rule.port or DEFAULT_PORTS[scheme]


def private_literal_warning(rule: GrantRule, health: GatewayHealth | None = None, *,
                            fresh: bool = False) -> str:
    """Why a grant naming a loopback or private IP literal reaches nothing yet: the gateway dials such an
    address only when the operator lists it (README, private upstreams); "" when listed or not a literal.
    The gateway is asked (`health`, else its health endpoint) only for such a literal."""
    if rule.compiled is None or rule.compiled.wildcard or rule.mode == "deny":
        return ""
    ip = internal_literal(rule.compiled.host)
    if ip is None:
        return ""
    health = health or gateway_health(fresh=fresh)
    port = _grant_port(rule)
    where = f"{rule.compiled.host}:{port}"
    if not health.answered:
        return (f"{where} is a loopback or private address: the gateway dials it only when its private "
                f"upstreams (ROSTER_GATEWAY_PRIVATE_UPSTREAMS) list it, and its health page "
                f"({health.url}) did not answer, so whether it is listed is not known.")
    if rule.port is None and not rule.tunnel and len(rule.schemes or matching.DEFAULT_GRANT_SCHEMES) > 1:
        ports = sorted({DEFAULT_PORTS[s] for s in rule.schemes or matching.DEFAULT_GRANT_SCHEMES})
        unlisted = [p for p in ports if not literal_listed(ip, p, health.private_upstreams)]
    else:
        unlisted = [] if literal_listed(ip, port, health.private_upstreams) else [port]
    if not unlisted:
        return ""
    listed = ", ".join(health.private_upstreams) or "none"
    return (f"{rule.compiled.host} (port {', '.join(map(str, unlisted))}) is a loopback or private address "
            f"the gateway's private upstreams do not list (listed: {listed}): requests this grant allows "
            "are refused blocked_address until the operator lists it (ROSTER_GATEWAY_PRIVATE_UPSTREAMS).")


def _shown(method: str, scheme: str, host: str, port: int, path: str, tunnel: bool,
           headers: dict[str, tuple[str, ...]]) -> str:
    if tunnel:
        return f"{host}:{port}"
    carried = "; ".join(f"{name}: {values[0]}" for name, values in headers.items())
    return f"{method} {scheme}://{host}:{port}{path}" + (f" with {carried}" if carried else "")


def examples(rule: GrantRule) -> list[tuple[str, bool]]:
    """(request, matches) pairs. The requests carry headers meeting the grant's header conditions where a
    value can be found (shown after "with"), so the ✓ rows are requests the grant applies to; a
    conditioned grant gets one example without those headers too. No body; the method is the grant's
    first listed method (or GET)."""
    if rule.broken or rule.compiled is None:
        return []
    method = "CONNECT" if rule.tunnel else (rule.methods[0] if rule.methods else "GET")
    scheme = "tunnel" if rule.tunnel else (rule.schemes or matching.DEFAULT_GRANT_SCHEMES)[0]
    port = rule.port or DEFAULT_PORTS[scheme]
    paths = ["/"] if rule.tunnel else _example_paths(rule)
    hosts = preview_requests.example_hosts(rule.compiled.host, rule.compiled.wildcard)
    headers, _missing = preview_requests.example_headers(rule.compiled.conditions)
    candidates = [(h, port, p, headers) for h in hosts for p in paths]
    other_port = port + 1 if port < 65535 else port - 1
    candidates.append((hosts[0], other_port, paths[0], headers))
    if headers and not rule.tunnel:  # early, so the cut to MAX_EXAMPLES keeps it
        candidates.insert(1, (hosts[0], port, paths[0], {}))
    mcp = (McpCall(matching.MCP_TOOL_CALL, rule.mcp_tools[0]),) if rule.mcp_tools else ()
    out = []
    for host, p, path, carried in candidates:
        spec = matching.match(rule.compiled, worker_id=rule.worker_id, method=method, scheme=scheme,
                              host=host, port=p, path=path, mcp=mcp, headers=carried, body_size=0)
        out.append((_shown(method, scheme, host, p, path, rule.tunnel, carried), spec is not None))
    matched = [e for e in out if e[1]][: MAX_EXAMPLES // 2]
    unmatched = [e for e in out if not e[1]][: MAX_EXAMPLES - len(matched)]
    return matched + unmatched


def missing_example_headers(rule: GrantRule) -> list[str]:
    """Headers whose `matches` pattern gave no example value: the examples are sent without them."""
    if rule.broken or rule.compiled is None:
        return []
    return preview_requests.example_headers(rule.compiled.conditions)[1]
