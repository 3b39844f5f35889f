"""The reference agent (workers/agent; `run start WORKER --agent TASK`): where its model is, passed to every
box as ROSTER_AGENT_* variables. Not secrets: the key stays in the vault and reaches the provider only
through a grant that injects it (the box holds the sentinel in ROSTER_AGENT_KEY_VARIABLE). To use a real
provider, change ROSTER_AGENT_BASE_URL (and ROSTER_AGENT_MODEL) and grant its host with key injection."""

from controlplane.core.env import env

ROSTER_AGENT_BASE_URL = env.str("ROSTER_AGENT_BASE_URL", "https://api.openai.com/v1")
ROSTER_AGENT_MODEL = env.str("ROSTER_AGENT_MODEL", "gpt-4o-mini")
ROSTER_AGENT_KEY_VARIABLE = env.str("ROSTER_AGENT_KEY_VARIABLE", "OPENAI_API_KEY")
ROSTER_AGENT_MAX_TURNS = env.int("ROSTER_AGENT_MAX_TURNS", 12, minimum=1)
ROSTER_AGENT_MAX_TOKENS = env.int("ROSTER_AGENT_MAX_TOKENS", 20000, minimum=1)
# MCP servers the agent may call, `name=url,name=url` (each still needs a grant naming its tools).
ROSTER_AGENT_MCP_SERVERS = env.str("ROSTER_AGENT_MCP_SERVERS", "")
