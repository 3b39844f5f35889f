"""`python3 -m workers.agent TASK…` (or the task on stdin): run the reference agent on one task."""

from __future__ import annotations

import sys

from workers.agent.config import ConfigError, config_from_env
from workers.agent.loop import MISCONFIGURED, run_agent


def main(argv: list[str]) -> int:
    task = " ".join(argv).strip() or sys.stdin.read().strip()
    if not task:
        print("roster agent: no task given (pass it as arguments or on stdin)", file=sys.stderr)
        return MISCONFIGURED
    try:
        config = config_from_env()
    except ConfigError as exc:
        print(f"roster agent: cannot start: {exc}", file=sys.stderr)
        return MISCONFIGURED
    return run_agent(config, task).exit_code


raise SystemExit(main(sys.argv[1:]))
