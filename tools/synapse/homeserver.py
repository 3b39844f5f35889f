"""Start Synapse on loopback and register users with its shared-secret registration API. Synapse lives in
its own virtualenv (its pins are its own), installed once by scripts/bootstrap.sh into a cache outside the
checkout (ROSTER_SYNAPSE_VENV, default /var/cache/roster/synapse-<version>), so CI and every worktree share
one install. Standard library only (tools/ never imports the control plane)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SYNAPSE_VERSION = "1.163.2"
DEFAULT_VENV = Path(f"/var/cache/roster/synapse-{SYNAPSE_VERSION}")
SERVER_NAME = "roster.test"


def synapse_venv() -> Path:
    return Path(os.environ.get("ROSTER_SYNAPSE_VENV") or DEFAULT_VENV)


def synapse_python() -> Path:
    python = synapse_venv() / "bin" / "python"
    if not python.is_file():
        raise RuntimeError(
            f"Synapse is not installed at {synapse_venv()}: run `make deps` (scripts/bootstrap.sh)"
        )
    return python


@dataclass(frozen=True)
class MatrixUser:
    user_id: str
    access_token: str
    device_id: str
    password: str


@dataclass
class Homeserver:
    url: str
    server_name: str
    shared_secret: str
    directory: Path
    process: subprocess.Popen

    def register(self, localpart: str, *, admin: bool = False, password: str | None = None) -> MatrixUser:
        """A new user through /_synapse/admin/v1/register (HMAC-SHA1 over nonce, user, password, admin)."""
        password = password or secrets.token_urlsafe(16)
        nonce = self.call("GET", "/_synapse/admin/v1/register")["nonce"]
        mac = hmac.new(self.shared_secret.encode(), digestmod=hashlib.sha1)
        for part in (nonce, localpart, password, "admin" if admin else "notadmin"):
            mac.update(part.encode() + (b"\x00" if part != ("admin" if admin else "notadmin") else b""))
        answer = self.call(
            "POST",
            "/_synapse/admin/v1/register",
            {
                "nonce": nonce,
                "username": localpart,
                "password": password,
                "admin": admin,
                "mac": mac.hexdigest(),
            },
        )
        return MatrixUser(answer["user_id"], answer["access_token"], answer["device_id"], password)

    def call(self, method: str, path: str, body: dict | None = None, token: str = "") -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)  # noqa: S310 - our own http://127.0.0.1 URL
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
        try:
            with opener.open(request, timeout=30) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{method} {path}: HTTP {exc.code} {exc.read()[:300]!r}") from None

    # Client-server helpers, as a person's chat client would do them.
    def create_room(self, user: MatrixUser, invite: list[str], name: str = "") -> str:
        return self.call(
            "POST",
            "/_matrix/client/v3/createRoom",
            {"preset": "private_chat", "invite": invite, "name": name},
            user.access_token,
        )["room_id"]

    def join(self, user: MatrixUser, room_id: str) -> None:
        self.call("POST", f"/_matrix/client/v3/rooms/{room_id}/join", {}, user.access_token)

    def send(self, user: MatrixUser, room_id: str, content: dict, event_type: str = "m.room.message") -> str:
        txn = secrets.token_hex(8)
        return self.call(
            "PUT", f"/_matrix/client/v3/rooms/{room_id}/send/{event_type}/{txn}", content, user.access_token
        )["event_id"]

    def say(self, user: MatrixUser, room_id: str, text: str) -> str:
        return self.send(user, room_id, {"msgtype": "m.text", "body": text})

    def react(self, user: MatrixUser, room_id: str, event_id: str, key: str) -> str:
        return self.send(
            user,
            room_id,
            {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}},
            "m.reaction",
        )

    def reply(self, user: MatrixUser, room_id: str, event_id: str, text: str) -> str:
        return self.send(
            user,
            room_id,
            {
                "msgtype": "m.text",
                "body": f"> <someone> quoted\n\n{text}",
                "m.relates_to": {"m.in_reply_to": {"event_id": event_id}},
            },
        )

    def messages(self, user: MatrixUser, room_id: str, limit: int = 100) -> list[dict]:
        """The room's messages, oldest first, with edits applied as a client shows them."""
        chunk = self.call(
            "GET", f"/_matrix/client/v3/rooms/{room_id}/messages?dir=b&limit={limit}", token=user.access_token
        )["chunk"]
        return [e for e in chunk[::-1] if e.get("type") == "m.room.message"]

    def set_name(self, user: MatrixUser, name: str) -> None:
        self.call(
            "PUT",
            f"/_matrix/client/v3/profile/{user.user_id}/displayname",
            {"displayname": name},
            user.access_token,
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(directory: Path, port: int, shared_secret: str) -> str:
    lines = {
        "server_name": json.dumps(SERVER_NAME),
        "pid_file": json.dumps(str(directory / "homeserver.pid")),
        "listeners": json.dumps(
            [
                {
                    "port": port,
                    "bind_addresses": ["127.0.0.1"],
                    "type": "http",
                    "tls": False,
                    "x_forwarded": False,
                    "resources": [{"names": ["client"], "compress": False}],
                }
            ]
        ),
        "database": json.dumps({"name": "sqlite3", "args": {"database": str(directory / "homeserver.db")}}),
        "log_config": json.dumps(str(directory / "log.yaml")),
        "media_store_path": json.dumps(str(directory / "media")),
        "signing_key_path": json.dumps(str(directory / "signing.key")),
        "registration_shared_secret": json.dumps(shared_secret),
        "macaroon_secret_key": json.dumps(secrets.token_hex(16)),
        "form_secret": json.dumps(secrets.token_hex(16)),
        "report_stats": "false",
        "enable_metrics": "false",
        "trusted_key_servers": "[]",
        "suppress_key_server_warning": "true",
        "federation_domain_whitelist": "[]",
        "url_preview_enabled": "false",
        "presence": json.dumps({"enabled": False}),
        # A test sends in bursts; Synapse's default limits would answer 429.
        **{
            name: json.dumps({"per_second": 1000, "burst_count": 1000})
            for name in ("rc_message", "rc_registration", "rc_joins_per_room")
        },
        "rc_login": json.dumps(
            {k: {"per_second": 1000, "burst_count": 1000} for k in ("address", "account", "failed_attempts")}
        ),
        "rc_joins": json.dumps({k: {"per_second": 1000, "burst_count": 1000} for k in ("local", "remote")}),
        "rc_invites": json.dumps(
            {k: {"per_second": 1000, "burst_count": 1000} for k in ("per_room", "per_user", "per_issuer")}
        ),
    }
    return "".join(f"{k}: {v}\n" for k, v in lines.items())


LOG_CONFIG = """version: 1
formatters: {plain: {format: '%(asctime)s %(levelname)s %(name)s %(message)s'}}
handlers: {file: {class: logging.FileHandler, formatter: plain, filename: LOGFILE}}
root: {level: WARNING, handlers: [file]}
disable_existing_loggers: false
"""


@contextlib.contextmanager
def homeserver(directory: Path, port: int = 0, timeout: float = 120.0) -> Iterator[Homeserver]:
    """A fresh Synapse under `directory` (its SQLite database, keys, log), stopped at exit."""
    directory.mkdir(parents=True, exist_ok=True)
    port = port or _free_port()
    shared_secret = secrets.token_urlsafe(24)
    config = directory / "homeserver.yaml"
    config.write_text(_config(directory, port, shared_secret))
    (directory / "log.yaml").write_text(LOG_CONFIG.replace("LOGFILE", str(directory / "homeserver.log")))
    python = str(synapse_python())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "PYTHON"))}
    subprocess.run(
        [python, "-m", "synapse.app.homeserver", "-c", str(config), "--generate-keys"],
        check=True,
        capture_output=True,
        timeout=120,
        env=env,
    )
    out = open(directory / "stdout.log", "ab")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(
        [python, "-m", "synapse.app.homeserver", "-c", str(config)],
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = Homeserver(f"http://127.0.0.1:{port}", SERVER_NAME, shared_secret, directory, process)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"Synapse exited with {process.returncode}; see {directory}/stdout.log")
            with contextlib.suppress(RuntimeError, OSError):
                server.call("GET", "/_matrix/client/versions")
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"Synapse did not answer on {server.url} in {timeout}s")
            time.sleep(0.2)
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 15)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(5)
        out.close()
