"""The agent's settings, from the box environment the dispatcher sets (controlplane settings
ROSTER_AGENT_*). The model key variable holds a sentinel; the gateway swaps in the real key in transit."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

PROPOSALS_URL = "http://proposals.roster.invalid/v1/proposals"


class ConfigError(ValueError):
    """A setting the agent cannot work with (named, never its value when it may be a credential)."""


def _int(env: dict[str, str], name: str, default: int, low: int = 1) -> int:
    raw = env.get(name, "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a whole number") from exc
    if value < low:
        raise ConfigError(f"{name} must be at least {low}")
    return value


def _mcp_servers(raw: str) -> dict[str, str]:
    """`name=url,name=url` or a JSON object {name: url}."""
    raw = raw.strip()
    if not raw:
        return {}
    if raw.startswith("{"):
        try:
            servers = json.loads(raw)
        except ValueError as exc:
            raise ConfigError("ROSTER_AGENT_MCP_SERVERS is not valid JSON") from exc
    else:
        servers = dict(part.split("=", 1) for part in raw.split(",") if "=" in part)
    if not all(isinstance(k, str) and isinstance(v, str) and v.startswith(("http://", "https://"))
               for k, v in servers.items()):
        raise ConfigError("ROSTER_AGENT_MCP_SERVERS maps names to http(s) URLs")
    return {k.strip(): v.strip() for k, v in servers.items()}


@dataclass(frozen=True)
class AgentConfig:
    base_url: str
    model: str
    api_key: str  # the sentinel the box holds, never the real key
    max_turns: int = 12
    max_tokens: int = 20000
    max_output_tokens: int = 1024
    stream: bool = True
    http_timeout: float = 120.0
    fetch_max_chars: int = 4000
    workspace: Path = Path("/workspace")
    proposals_url: str = PROPOSALS_URL
    mcp_servers: dict[str, str] = field(default_factory=dict)


def config_from_env(env: dict[str, str] | None = None) -> AgentConfig:
    env = dict(os.environ if env is None else env)
    base_url = env.get("ROSTER_AGENT_BASE_URL", "").rstrip("/")
    if not base_url.startswith(("http://", "https://")):
        raise ConfigError("ROSTER_AGENT_BASE_URL must be the model API's http(s) base URL, e.g. "
                          "https://api.openai.com/v1")
    model = env.get("ROSTER_AGENT_MODEL", "")
    if not model:
        raise ConfigError("ROSTER_AGENT_MODEL must name the model")
    key_variable = env.get("ROSTER_AGENT_KEY_VARIABLE") or "OPENAI_API_KEY"
    api_key = env.get(key_variable, "")
    if not api_key:
        raise ConfigError(f"no model key in {key_variable}: grant the worker a model key secret")
    return AgentConfig(
        base_url=base_url, model=model, api_key=api_key,
        max_turns=_int(env, "ROSTER_AGENT_MAX_TURNS", 12),
        max_tokens=_int(env, "ROSTER_AGENT_MAX_TOKENS", 20000),
        max_output_tokens=_int(env, "ROSTER_AGENT_MAX_OUTPUT_TOKENS", 1024),
        stream=env.get("ROSTER_AGENT_STREAM", "1") not in ("0", "false", "no"),
        http_timeout=float(_int(env, "ROSTER_AGENT_HTTP_TIMEOUT", 120)),
        workspace=Path(env.get("ROSTER_AGENT_WORKSPACE") or "/workspace"),
        proposals_url=env.get("ROSTER_AGENT_PROPOSALS_URL") or PROPOSALS_URL,
        mcp_servers=_mcp_servers(env.get("ROSTER_AGENT_MCP_SERVERS", "")),
    )
