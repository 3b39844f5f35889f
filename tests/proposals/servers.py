"""Real servers the executors talk to in tests: an SMTP server (aiosmtpd), an HTTP webhook receiver and
a bare Git repository with a pre-receive hook. All on loopback or the local filesystem."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from aiosmtpd.controller import Controller


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MailBox:
    def __init__(self):
        self.messages: list[tuple[str, list[str], bytes]] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 Message accepted for delivery"


@contextmanager
def smtp_server(port: int | None = None, host: str = "127.0.0.1"):
    box = MailBox()
    controller = Controller(box, hostname=host, port=port or free_port())
    controller.start()
    try:
        yield controller.port, box
    finally:
        controller.stop()


class Receiver:
    def __init__(self):
        self.requests: list[dict] = []
        self.statuses: list[int] = []  # answered in order; 200 once exhausted


@contextmanager
def webhook_server(port: int | None = None, host: str = "127.0.0.1"):
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def _any(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            receiver.requests.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers),
                    "body": json.loads(body) if body else None,
                }
            )
            status = receiver.statuses.pop(0) if receiver.statuses else 200
            payload = json.dumps({"received": True}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_POST = do_PUT = do_PATCH = _any  # noqa: N815 - http.server's method names

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer((host, port or free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], receiver
    finally:
        server.shutdown()
        server.server_close()


def git(*args, cwd: Path | None = None) -> str:
    env = {
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": "/usr/bin:/bin",
        "HOME": str(cwd or Path.home()),
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


PRE_RECEIVE = """#!/bin/sh
while read old new ref; do
  case "$ref" in refs/heads/frozen*) echo "frozen branches take no pushes" >&2; exit 1;; esac
done
"""


def bare_repo(root: Path) -> tuple[Path, Path, str]:
    """A bare remote with one commit on main (and a hook refusing refs/heads/frozen*), a working clone to
    make proposals from, and the base commit."""
    remote = root / "remote.git"
    git("init", "--quiet", "--bare", "--initial-branch=main", str(remote))
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(PRE_RECEIVE)
    hook.chmod(0o755)
    work = root / "work"
    git("clone", "--quiet", str(remote), str(work))
    (work / "README").write_text("hello\n")
    git("add", "README", cwd=work)
    git("commit", "--quiet", "-m", "first", cwd=work)
    git("push", "--quiet", "origin", "HEAD:main", cwd=work)
    return remote, work, git("rev-parse", "HEAD", cwd=work)


def make_patch(work: Path, base: str, text: str = "hello\nworld\n") -> str:
    (work / "README").write_text(text)
    git("commit", "--quiet", "-am", "Say world", cwd=work)
    return git("format-patch", "--stdout", f"{base}..HEAD", cwd=work) + "\n"
