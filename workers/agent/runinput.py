"""The run's input as the trusted side assembled it (docs/architecture.md, "The run's input and answer"):
/config/input.json (data) and /config/prompt.md (the same as one user message). When the input carries a
conversation or notes, prompt.md is the agent's user message: every turn quoted with its speaker and role,
so a message reaches the model as content, never as its system prompt (P5). Read-only, written before the
box started; nothing here is trusted (invariant 1), it is only passed on."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

CONFIG_DIR = Path("/config")


@dataclass(frozen=True)
class RunInput:
    prompt: str  # the user message to send ("" when the input has nothing beyond the task)
    channel: str
    turns: int
    notes: int


def load(config_dir: Path = CONFIG_DIR) -> RunInput | None:
    """The input when it carries more than the task (a conversation or notes), else None."""
    try:
        document = json.loads((config_dir / "input.json").read_text())
        prompt = (config_dir / "prompt.md").read_text()
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict):
        return None
    conversation = document.get("conversation") if isinstance(document.get("conversation"), dict) else None
    notes = document.get("notes") if isinstance(document.get("notes"), list) else []
    if conversation is None and not notes:
        return None
    turns = conversation.get("turns") if conversation else []
    channel = str(conversation.get("channel", "")) if conversation else ""
    count = len(turns) if isinstance(turns, list) else 0
    return RunInput(prompt=prompt.strip(), channel=channel, turns=count, notes=len(notes))
