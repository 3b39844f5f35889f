"""Scripts that drive each preset's agent through its own tool loop: the same plan (write a file, fetch an
allowed URL, be refused one, answer) spelled in the tools that agent really offers the model, so a test
or the demo exercises the agent's real tools rather than a stand-in.

An agent fetches with its shell tool and curl: every preset's agent has a shell tool, curl honours the
box's proxy and CA variables, and curl prints a refusal's body and status, so the refusal reaches the
model's next turn as text whatever the agent's own fetch tool would make of a 403."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

# What curl prints after the body: the status, so a refusal reads as one in the tool result.
FETCH_STATUS_LINE = "\nHTTP status %{http_code}\n"


WORKSPACE = "/workspace"  # the box's working directory and $HOME


def fetch_command(url: str) -> str:
    return f"curl -sS --max-time 30 -w {shlex.quote(FETCH_STATUS_LINE)} {shlex.quote(url)}"


def _shell_write(path: str, content: str) -> str:
    """A shell line that writes `content` to `path` exactly (printf '%s', no trailing newline added)."""
    directory = path.rsplit("/", 1)[0] if "/" in path else "."
    return f"mkdir -p {shlex.quote(directory)} && printf '%s' {shlex.quote(content)} > {shlex.quote(path)}"


@dataclass(frozen=True)
class AgentTools:
    """How one agent's model asks for a file write and a shell command (the tool's name and arguments
    as that agent declares them to the model)."""

    write: Callable[[str, str], dict]
    command: Callable[[str], dict]


def _call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


AGENT_TOOLS: dict[str, AgentTools] = {
    # pi: dist/core/tools/write.js and bash.js in @mariozechner/pi-coding-agent
    "pi": AgentTools(write=lambda path, content: _call("write", path=path, content=content),
                     command=lambda line: _call("bash", command=line)),
    # Claude Code: FileWriteInput (an absolute file_path) and BashInput in the package's sdk-tools.d.ts
    "claude-code": AgentTools(
        write=lambda path, content: _call("Write", file_path=f"{WORKSPACE}/{path}", content=content),
        command=lambda line: _call("Bash", command=line, description="Run the step's command")),
    # Codex 0.171: its one shell tool, `exec_command` (`cmd`), as the request's `tools` declare it; it has
    # no separate file-write tool (it writes with the shell), so the write is a shell here-document.
    "codex": AgentTools(write=lambda path, content: _call("exec_command", cmd=_shell_write(path, content)),
                        command=lambda line: _call("exec_command", cmd=line)),
    # OpenCode 1.18: `write` (`filePath`, absolute; `content`) and `bash` (`command`), as the request's
    # `tools` declare them.
    "opencode": AgentTools(
        write=lambda path, content: _call("write", filePath=f"{WORKSPACE}/{path}", content=content),
        command=lambda line: _call("bash", command=line)),
    # Gemini CLI 0.61: `write_file` (`file_path`, `content`) and `run_shell_command` (`command`), as its
    # request's functionDeclarations name them.
    "gemini-cli": AgentTools(
        write=lambda path, content: _call("write_file", file_path=f"{WORKSPACE}/{path}", content=content),
        command=lambda line: _call("run_shell_command", command=line, description="Run the step's command")),
}


@dataclass(frozen=True)
class Plan:
    """The item-7 task: write `content` to `path` (relative to the workspace), fetch `allowed_url`,
    try `denied_url` (the gateway refuses it), and answer `answer`."""

    path: str
    content: str
    allowed_url: str
    denied_url: str
    answer: str


def agent_script(slug: str, plan: Plan, model: str = "roster-scripted") -> dict:
    """The scripted model's script (tools.scripted_model.script) for `slug`'s agent following `plan`."""
    try:
        tools = AGENT_TOOLS[slug]
    except KeyError:
        raise ValueError(f"no scripted tools for agent {slug!r} (known: {sorted(AGENT_TOOLS)})") from None
    check = f"sha256sum {shlex.quote(plan.path)} && {fetch_command(plan.allowed_url)}"
    return {"model": model, "steps": [
        {"say": "Writing the notes file first.", "tools": [tools.write(plan.path, plan.content)]},
        # The file's checksum first: the model's next turn then shows the write really happened.
        {"say": "Checking the file, then the allowed page.",
         "tools": [tools.command(check)]},
        {"say": "And the other one.", "tools": [tools.command(fetch_command(plan.denied_url))]},
        {"say": plan.answer},
    ]}
