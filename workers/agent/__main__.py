"""`python3 -m workers.agent [--base-url URL] [--model NAME] [--] TASK…` (or the task on stdin): run the
reference agent on one task. The options override ROSTER_AGENT_BASE_URL / ROSTER_AGENT_MODEL from the box
environment (`run start --agent` records the filing control plane's settings in the run's command)."""

from __future__ import annotations

import argparse
import os
import sys

from workers.agent import runinput
from workers.agent.config import ConfigError, config_from_env
from workers.agent.loop import MISCONFIGURED, run_agent


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m workers.agent")
    parser.add_argument("--base-url", default=None, help="the model API's base URL, e.g. https://api.openai.com/v1")
    parser.add_argument("--model", default=None)
    parser.add_argument("task", nargs="*")
    args = parser.parse_args(argv)
    task = " ".join(args.task).strip() or sys.stdin.read().strip()
    if not task:
        print("roster agent: no task given (pass it as arguments or on stdin)", file=sys.stderr)
        return MISCONFIGURED
    env = dict(os.environ)
    if args.base_url:
        env["ROSTER_AGENT_BASE_URL"] = args.base_url
    if args.model:
        env["ROSTER_AGENT_MODEL"] = args.model
    try:
        config = config_from_env(env)
    except ConfigError as exc:
        print(f"roster agent: cannot start: {exc}", file=sys.stderr)
        return MISCONFIGURED
    return run_agent(config, task, run_input=runinput.load()).exit_code


raise SystemExit(main(sys.argv[1:]))
