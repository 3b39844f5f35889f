"""Readiness checks for the one-machine stack (scripts/up.sh): each one authenticates where the real caller
does and checks the answer, not just that a port is open. Standard library only.

    stack_check.py decision-api|gateway|web|relay|boxwatcher|canary [--wait SECONDS]

Prints one line, `ok: ...` or `FAILED: what is wrong and where to look`, and exits 0 or 1. `canary` sends
one request through the gateway on the box bridge's address, as a box would, and wants a legible decision
from the control plane (a 407 bad_token deny: the canary has no run token); a 503 means the gateway could
not get a decision. `boxwatcher` wants the box watcher's heartbeat fresh: it is written each time the
watcher's loop turns, after it reached Docker and reconciled this host's runs."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VAR = REPO / "var"
DECISION_PORT = int(os.environ.get("ROSTER_DECISION_API_PORT", "8002"))
WEB_PORT = int(os.environ.get("ROSTER_WEB_PORT", "8000"))
GATEWAY_PORT = int(os.environ.get("ROSTER_GATEWAY_PORT", "8080"))
HEALTH_PORT = int(os.environ.get("ROSTER_GATEWAY_HEALTH_PORT", "8081"))
METRICS_PORT = int(os.environ.get("ROSTER_METRICS_PORT", "8003"))
RELAY_PORT = int(os.environ.get("ROSTER_RELAY_PORT", "8004"))
BRIDGE = os.environ.get("ROSTER_BOX_BRIDGE", "roster-br0")
TIMEOUT = 5.0
HEARTBEAT = Path(os.environ.get("ROSTER_BOXWATCHER_HEARTBEAT_FILE",
                                str(VAR / "run" / "boxwatcher.heartbeat")))
HEARTBEAT_FRESH_SECONDS = 10.0


class Failed(Exception):
    """What is wrong, in words an operator can act on."""


def _get(
    host: str, port: int, path: str, headers: dict[str, str] | None = None, proxy_target: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
    try:
        conn.request("GET", proxy_target or path, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read(65536)
    except OSError as exc:
        raise Failed(f"nothing answers on {host}:{port} ({exc.__class__.__name__}: {exc})") from exc
    finally:
        conn.close()


def _json(body: bytes) -> dict:
    try:
        doc = json.loads(body)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def service_token() -> str:
    path = VAR / "gateway" / "service.token"
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise Failed(
            f"the gateway's service token {path} is unreadable (scripts/gateway-up.sh mints it)"
        ) from exc


def check_decision_api() -> str:
    status, _, body = _get(
        "127.0.0.1", DECISION_PORT, "/api/gateway/health", {"Authorization": f"Bearer {service_token()}"}
    )
    if status == 401:
        raise Failed(
            "the decision API refuses the gateway's own service token (401): it does not have the "
            "token's hash var/gateway-token.sha256; see var/log/decision-api.log"
        )
    if status != 200 or _json(body).get("ok") is not True:
        raise Failed(
            f"the decision API's health answered {status} {body[:200]!r}; see var/log/decision-api.log"
        )
    return f"decision API answers the gateway's token on 127.0.0.1:{DECISION_PORT}" + check_metrics()


def check_metrics() -> str:
    """The decision API's metrics listener: refuses a scrape without the token, serves one with it."""
    if not METRICS_PORT:
        return ""
    where = f"127.0.0.1:{METRICS_PORT}/metrics"
    status, _, _ = _get("127.0.0.1", METRICS_PORT, "/metrics")
    if status != 401:
        raise Failed(f"the metrics listener {where} answered {status} without the scrape token (want 401)")
    try:
        token = (VAR / "metrics.token").read_text().strip()
    except OSError as exc:
        raise Failed("the scrape token var/metrics.token is unreadable (scripts/mint-secrets.sh makes it)"
                     ) from exc
    status, _, body = _get("127.0.0.1", METRICS_PORT, "/metrics", {"Authorization": f"Bearer {token}"})
    if status != 200 or b"roster_decisions_total" not in body:
        raise Failed(f"the metrics listener {where} answered {status} to the scrape token; "
                     "see var/log/decision-api.log")
    return f"; metrics on http://{where} (bearer var/metrics.token)"


def check_gateway() -> str:
    status, _, body = _get("127.0.0.1", HEALTH_PORT, "/healthz")
    doc = _json(body)
    if doc.get("disagreements"):
        raise Failed("the gateway's settings disagree with the control plane's, so it refuses every request: "
                     + "; ".join(map(str, doc["disagreements"]))
                     + " (docs/settings.md, settings the gateway shares; see var/log/gateway.log)")
    if doc.get("control_plane") is not True:
        raise Failed(
            f"the gateway cannot get answers from the control plane (health {status}: "
            f"{body[:200].decode(errors='replace')}); see var/log/gateway.log and var/log/decision-api.log"
        )
    listed = doc.get("private_upstreams") or []
    status, _, body = _get("127.0.0.1", HEALTH_PORT, "/metrics")
    if status != 200 or b"roster_gateway_requests_total" not in body:
        raise Failed(f"the gateway's metrics on 127.0.0.1:{HEALTH_PORT}/metrics answered {status}; "
                     "see var/log/gateway.log")
    return "gateway healthy, control plane reachable, metrics served" + (
        f"; private upstreams: {', '.join(listed)}" if listed else ""
    )


def check_web() -> str:
    status, _, _ = _get("127.0.0.1", WEB_PORT, "/accounts/login/")
    if status != 200:
        raise Failed(f"the web server's login page answered {status}; see var/log/web.log")
    status, headers, _ = _get("127.0.0.1", WEB_PORT, "/static/admin/css/base.css")
    if status != 200 or not headers.get("content-type", "").startswith("text/css"):
        raise Failed(
            f"the admin's stylesheet /static/admin/css/base.css answered {status}: static files are not "
            "served (collectstatic into var/static, WhiteNoise); see var/log/web.log"
        )
    return f"web and admin on http://127.0.0.1:{WEB_PORT}/ (styles served)"


def check_relay() -> str:
    """The relay answers its health with its database reachable, and says how each chat server's
    connection stands (a server still connecting is said, not failed: the relay retries with backoff)."""
    status, _, body = _get("127.0.0.1", RELAY_PORT, "/healthz")
    doc = _json(body)
    if status != 200 or doc.get("ok") is not True:
        raise Failed(f"the relay's health answered {status} {body[:200]!r}; see var/log/relay.log")
    servers = doc.get("matrix") if isinstance(doc.get("matrix"), dict) else {}
    down = [f"server {k}: {v.get('error') or 'connecting'}" for k, v in servers.items()
            if isinstance(v, dict) and not v.get("connected")]
    said = (f"relay on 127.0.0.1:{RELAY_PORT} (signed webhooks at /hooks/<channel>), "
            f"{len(servers)} chat server(s)")
    return said + (f"; not connected yet: {'; '.join(down)[:300]}" if down else "")


def bridge_address() -> str:
    try:
        out = subprocess.run(
            ["ip", "-4", "-o", "addr", "show", "dev", BRIDGE],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        ).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            return parts[parts.index("inet") + 1].split("/")[0]
    raise Failed(f"the box bridge {BRIDGE} has no IPv4 address (scripts/network-lockdown.sh creates it)")


def check_canary() -> str:
    address = bridge_address()
    status, headers, body = _get(address, GATEWAY_PORT, "", proxy_target="http://roster-canary.invalid/")
    doc = _json(body)
    if status == 407 and doc.get("verdict") == "deny" and doc.get("reason") == "bad_token":
        return (
            f"canary: a request through the gateway on {address}:{GATEWAY_PORT} got the control plane's "
            "decision (407 bad_token: it carried no run token)"
        )
    reason = doc.get("reason") or body[:200].decode(errors="replace")
    hint = (
        "the gateway could not get a decision from the control plane"
        if status == 503
        else "the answer is not the control plane's decision"
    )
    if isinstance(doc.get("message"), str) and doc["message"]:
        hint += f" (the gateway said: {doc['message'][:200]})"
    raise Failed(
        f"canary through the gateway on {address}:{GATEWAY_PORT} answered {status} ({reason}): {hint}; "
        "see var/log/gateway.log and var/log/decision-api.log"
    )


def check_boxwatcher() -> str:
    try:
        stamp, _, watched = HEARTBEAT.read_text().strip().partition(" ")
        age = time.time() - float(stamp)
    except (OSError, ValueError) as exc:
        raise Failed(f"the box watcher has written no heartbeat at {HEARTBEAT}; see var/log/boxwatcher.log"
                     ) from exc
    if age > HEARTBEAT_FRESH_SECONDS:
        raise Failed(f"the box watcher's heartbeat is {age:.0f}s old (it is stuck or gone); "
                     "see var/log/boxwatcher.log")
    return f"box watcher reconciled and watching {watched or 0} box(es)"


CHECKS = {
    "decision-api": check_decision_api,
    "gateway": check_gateway,
    "web": check_web,
    "relay": check_relay,
    "canary": check_canary,
    "boxwatcher": check_boxwatcher,
}
# The ports each process listens on, with the setting that moves them: when a check fails because some
# other program (another checkout's stack, say) holds one, the failure names that program.
PORTS = {
    "decision-api": lambda: [(DECISION_PORT, "ROSTER_DECISION_API_PORT"),
                             (METRICS_PORT, "ROSTER_METRICS_PORT")],
    "gateway": lambda: [(GATEWAY_PORT, "ROSTER_GATEWAY_PORT"), (HEALTH_PORT, "ROSTER_GATEWAY_HEALTH_PORT")],
    "web": lambda: [(WEB_PORT, "ROSTER_WEB_PORT")],
    "relay": lambda: [(RELAY_PORT, "ROSTER_RELAY_PORT")],
    "canary": lambda: [],
    "boxwatcher": lambda: [],
}


def listening_pids(port: int) -> list[int]:
    """Processes with a TCP socket listening on `port` (any address), read from the kernel's tables in
    /proc rather than from a tool's text (a process name may hold any bytes); [] when it cannot tell."""
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text(errors="replace").splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()  # sl, local address:port (hex), remote, state (0A: listening), ..., inode
            if len(fields) > 9 and fields[3] == "0A" and fields[1].rsplit(":", 1)[-1] == f"{port:04X}":
                sockets.add(f"socket:[{fields[9]}]")
    pids = set()
    for process in Path("/proc").iterdir() if sockets else ():
        if not process.name.isdigit():
            continue
        try:
            descriptors = list((process / "fd").iterdir())
        except OSError:  # gone, or not ours to look at
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(descriptor) in sockets:
                    pids.add(int(process.name))
                    break
            except OSError:
                continue
    return sorted(pids)


def _describe(pid: int) -> str:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        command = "?"
    try:
        where = f" in {os.readlink(f'/proc/{pid}/cwd')}"
    except OSError:
        where = ""
    shown = "".join(c if c.isprintable() else "?" for c in command.strip()[:120])
    return f"pid {pid} ({shown}){where}"


def foreign_holders(check: str, pidfile: Path | None) -> str:
    """Words for every port of `check` held by a process that is not the one `pidfile` started (up.sh
    starts each in its own process group, so the group's id is that pid); "" when there is none."""
    try:
        ours = int(pidfile.read_text().strip()) if pidfile else None
    except (OSError, ValueError):
        ours = None
    said = []
    for port, setting in PORTS[check]():
        for pid in listening_pids(port) if port else []:
            try:
                group = os.getpgid(pid)
            except OSError:
                continue
            if ours is None or group != ours:
                said.append(f"port {port} is held by {_describe(pid)}, not by this stack's {check}: "
                            f"stop that (another checkout's stack: `make down` there) or set {setting}")
    return "; ".join(said)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("check", choices=sorted(CHECKS))
    parser.add_argument("--wait", type=float, default=0, help="keep trying this many seconds")
    parser.add_argument("--pidfile", type=Path, help="stop waiting once this process has exited")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.wait
    while True:
        try:
            print(f"ok: {CHECKS[args.check]()}")
            return 0
        except Failed as exc:
            if time.monotonic() >= deadline or (args.pidfile and not _alive(args.pidfile)):
                holders = foreign_holders(args.check, args.pidfile)
                print(f"FAILED: {holders}; so: {exc}" if holders else f"FAILED: {exc}")
                return 1
        time.sleep(0.25)


def _alive(pidfile: Path) -> bool:
    try:
        os.kill(int(pidfile.read_text().strip()), 0)
    except (OSError, ValueError):
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
