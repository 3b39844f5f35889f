"""`python3 -m workers.runtime [--] COMMAND ARGS…`: replace this process with the run's command.
Without a command, the one named in the read-only run config (/config/run.json) is used. A run of a
preset first gets the preset's files in $HOME and, if it says so, the prompt on stdin
(workers.runtime.presetfiles)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from workers.runtime import presetfiles

RUN_CONFIG = Path("/config/run.json")
# Exit codes a shell would use, so a run's failure reads the same as on a terminal.
EXIT_NOT_FOUND = 127
EXIT_CANNOT_RUN = 126
EXIT_MISCONFIGURED = 125


def command_from(argv: Sequence[str], config_path: Path = RUN_CONFIG) -> list[str]:
    args = list(argv)
    if args and args[0] == "--":
        args = args[1:]
    if args:
        return args
    if config_path.is_file():
        command = json.loads(config_path.read_text()).get("command") or []
        if isinstance(command, list) and all(isinstance(part, str) for part in command):
            return command
    return []


def misconfiguration(env: dict[str, str], uid: int) -> str:
    """Why this box must not run, or "" when it looks as the dispatcher promised."""
    if uid == 0:
        return "the box runs as root"
    if not (env.get("HTTPS_PROXY") and env.get("HTTP_PROXY")):
        return "no gateway proxy in the environment"
    return ""


def main(argv: Sequence[str]) -> int:
    command = command_from(argv)
    if not command:
        print("roster runtime: no command to run", file=sys.stderr)
        return EXIT_MISCONFIGURED
    problem = misconfiguration(dict(os.environ), os.getuid())
    if problem:
        print(f"roster runtime: refusing to start: {problem}", file=sys.stderr)
        return EXIT_MISCONFIGURED
    try:
        doc = presetfiles.manifest()
        presetfiles.set_up(doc, Path(os.environ.get("HOME") or "/workspace"))
        presetfiles.stdin_from(doc)
    except (presetfiles.PresetSetupError, OSError) as exc:
        print(f"roster runtime: refusing to start: the preset's files: {exc}", file=sys.stderr)
        return EXIT_MISCONFIGURED
    try:
        os.execvp(command[0], command)  # noqa: S606 - exec the run's argv as given, no shell
    except FileNotFoundError:
        print(f"roster runtime: command not found: {command[0]}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except OSError as exc:
        print(f"roster runtime: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    return EXIT_CANNOT_RUN  # not reached: execvp replaces the process
